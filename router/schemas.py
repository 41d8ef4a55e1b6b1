"""The node's request bodies: OpenAI's (:mod:`models.openai`) with the node's extensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator, model_validator

from models import GenerationRequest
from models.llamacpp import LlamaCompletionBody
from models.ollama import OllamaChatBody, OllamaGenerateBody
from models.openai import ChatBody, CompletionBody, ResponsesBody, field_path

from .choices import MAX_CHOICES
from .errors import InvalidRequestError
from .limits import precheck

_M = TypeVar("_M", bound=BaseModel)


class _NodeFields(BaseModel):
    """What the node adds: ``model`` may be a route (``auto``, ``edge``, ``cloud``), and the
    ``cache`` and ``private`` switches (also settable by headers)."""

    model: str = Field("auto", min_length=1, max_length=256)
    n: Annotated[int, Field(ge=1, le=MAX_CHOICES)] = 1  # choices, each its own generation (router.choices)
    user: str | None = None
    cache: bool | None = None
    private: bool | None = None

    @field_validator("stop", check_fields=False)
    @classmethod
    def _stop_not_empty(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, str) and not value:
            raise ValueError("stop must not be an empty string")
        if isinstance(value, list) and any(not s for s in value):
            raise ValueError("stop sequences must not be empty strings")
        return value


class ChatCompletionRequest(_NodeFields, ChatBody):
    @model_validator(mode="before")
    @classmethod
    def _count_first(cls, data: Any) -> Any:
        precheck(data)  # 20,000 messages are refused before 20,000 models are built
        return data

    def to_generation(self, request_id: str, tenant: str = "") -> GenerationRequest:
        return GenerationRequest(
            params=self.sampling(), messages=self.plain_messages(), model=self.model, request_id=request_id,
            fair_key=tenant,
        )


# A prompt as token ids (OpenAI's and vLLM's int arrays): the edge model's, as /tokenize gives them.
TokenIds = Annotated[list[Annotated[int, Field(ge=0, strict=True)]], Field(min_length=1)]


class CompletionRequest(_NodeFields, CompletionBody):
    # Several prompts, as OpenAI and vLLM take them: each is completed n times, its choices at
    # indices prompt * n + i (router.choices); every generation counts against MAX_CHOICES.
    # Token-id prompts are made text (router.respond.text_prompts) before anything else reads them.
    prompt: (
        str
        | Annotated[list[str], Field(min_length=1, max_length=MAX_CHOICES)]
        | TokenIds
        | Annotated[list[TokenIds], Field(min_length=1, max_length=MAX_CHOICES)]
    )
    echo: bool = False  # the answer repeats the prompt before the completion
    suffix: str | None = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _one_shape(cls, value: Any) -> Any:
        # One clear message instead of pydantic's four failed union branches.
        def ids(v: Any) -> bool:
            return isinstance(v, list) and all(type(t) is int for t in v)

        if isinstance(value, list) and value and not (
            all(isinstance(v, str) for v in value) or ids(value) or all(ids(v) for v in value)
        ):
            raise ValueError("give a string, a list of strings, a list of token ids or a list of token-id lists")
        return value

    @model_validator(mode="after")
    def _generations_bounded(self) -> CompletionRequest:
        count = len(self.token_prompts() or self.prompts())
        if count * self.n > MAX_CHOICES:
            raise ValueError(f"{count} prompts x n {self.n}: at most {MAX_CHOICES} completions per request")
        return self

    def token_prompts(self) -> list[list[int]] | None:
        """The prompts when they are given as token ids, else None."""
        p = self.prompt
        if isinstance(p, list) and p and isinstance(p[0], int):
            return [list(p)]  # type: ignore[arg-type]
        if isinstance(p, list) and p and isinstance(p[0], list):
            return [list(ids) for ids in p]  # type: ignore[union-attr]
        return None

    def prompts(self) -> list[str]:
        if self.token_prompts() is not None:
            raise TypeError("token-id prompts are read as text first (router.respond.text_prompts)")
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _no_prompt_logprobs(self) -> CompletionRequest:
        if self.echo and self.logprobs is not None:
            raise ValueError("echo with logprobs asks for the prompt's log probabilities, which this node does not compute")
        return self

    def to_generation(self, request_id: str, tenant: str = "") -> GenerationRequest:
        return GenerationRequest(
            params=self.sampling(), prompt=self.prompt_text(), model=self.model, request_id=request_id,
            fair_key=tenant,
        )


# The chat fields a Responses request's fields become, named back in its errors.
_RESPONSES_NAMES = {
    "messages": "input", "max_tokens": "max_output_tokens", "response_format": "text.format",
    "response_format.json_schema": "text.format",
}


class ResponsesRequest(_NodeFields, ResponsesBody):
    """``POST /v1/responses``, validated as the chat completion it asks for (:attr:`chat`)."""

    _chat: ChatCompletionRequest | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _count_first(cls, data: Any) -> Any:
        precheck(data, "input")
        return data

    @model_validator(mode="after")
    def _as_chat(self) -> ResponsesRequest:
        if self.n != 1:
            raise InvalidRequestError("n: the Responses API answers one output; use /v1/chat/completions for n choices", param="n")
        self._chat = self.to_chat()
        return self

    def to_chat(self, prior: Sequence[dict[str, Any]] = ()) -> ChatCompletionRequest:
        """The chat completion this request asks for, continuing the conversation ``prior``
        (that of ``previous_response_id``)."""
        # Unknown fields pass on (a chat extension such as ``seed`` or ``stop`` is honoured);
        # the Responses fields win over them.
        fields = {**(self.model_extra or {}), **self.chat_fields(prior), "cache": self.cache, "private": self.private}
        fields["user"] = self.user
        return _validate_as(ChatCompletionRequest, fields, _RESPONSES_NAMES)

    @property
    def chat(self) -> ChatCompletionRequest:
        assert self._chat is not None  # set by the validator
        return self._chat


def _validate_as(model: type[_M], fields: dict[str, Any], names: dict[str, str]) -> _M:
    """``fields`` validated as ``model``, the first error named by the field the client wrote
    (``names``: the OpenAI field's first part -> the client's API's name)."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        errors = exc.errors()
        # A union's failed branches ("Input should be a valid string") come before the error of the
        # branch the value was meant for, which says what is wrong with it.
        first = next((e for e in errors if not str(e["type"]).endswith("_type")), errors[0])
        loc = (field_path(".".join(str(p) for p in first["loc"])) or "").split(".") if first["loc"] else []
        if loc[:2] == ["response_format", "json_schema"] and "response_format.json_schema" in names:
            loc = [names["response_format.json_schema"], *loc[2:]]
        elif loc:
            loc[0] = names.get(loc[0], loc[0])
        param = ".".join(loc) or None
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidRequestError(f"{param}: {message}" if param else message, param=param, code="invalid_value") from None


# llama.cpp's server and Ollama take any number of stop strings (OpenAI's API 4): chat front-ends
# send one per speaker name and template marker. Bounded all the same, each is matched as text comes.
MAX_NATIVE_STOPS = 32


class NativeChatRequest(ChatCompletionRequest):
    """The chat completion an Ollama request asks for."""

    stop: str | Annotated[list[str], Field(max_length=MAX_NATIVE_STOPS)] | None = None


class NativeCompletionRequest(CompletionRequest):
    """The text completion a llama.cpp ``/completion`` or Ollama ``raw`` request asks for."""

    stop: str | Annotated[list[str], Field(max_length=MAX_NATIVE_STOPS)] | None = None


# Ollama's names of the OpenAI fields its requests become (options are Ollama's sampling knobs).
_OLLAMA_NAMES = {
    "max_tokens": "options.num_predict", "temperature": "options.temperature", "top_p": "options.top_p",
    "seed": "options.seed", "stop": "options.stop", "presence_penalty": "options.presence_penalty",
    "frequency_penalty": "options.frequency_penalty", "response_format": "format",
    "response_format.json_schema": "format", "logprobs": "top_logprobs", "top_k": "options.top_k",
    "min_p": "options.min_p", "repeat_penalty": "options.repeat_penalty",
}


class OllamaChatRequest(OllamaChatBody):
    """``POST /api/chat``; :meth:`openai` is the chat completion it asks for."""

    @model_validator(mode="before")
    @classmethod
    def _count_first(cls, data: Any) -> Any:
        precheck(data)
        return data

    def openai(self) -> ChatCompletionRequest:
        return _validate_as(NativeChatRequest, self.openai_fields(), _OLLAMA_NAMES)


class OllamaGenerateRequest(OllamaGenerateBody):
    """``POST /api/generate``; :meth:`openai` is the chat completion (or, ``raw``, the text
    completion) it asks for."""

    def openai(self) -> ChatCompletionRequest | CompletionRequest:
        names = {**_OLLAMA_NAMES, "messages": "prompt"}
        if self.raw:
            return _validate_as(NativeCompletionRequest, self.openai_fields(), names)
        return _validate_as(NativeChatRequest, self.openai_fields(), names)


# llama.cpp's names of the OpenAI fields its /completion body becomes.
_LLAMA_NAMES = {
    "max_tokens": "n_predict", "logprobs": "n_probs", "response_format": "json_schema",
    "response_format.json_schema": "json_schema",
}


class LlamaCompletionRequest(LlamaCompletionBody):
    """llama.cpp's ``POST /completion``; :meth:`openai` is the text completion it asks for."""

    def openai(self) -> CompletionRequest:
        return _validate_as(NativeCompletionRequest, self.openai_fields(), _LLAMA_NAMES)
