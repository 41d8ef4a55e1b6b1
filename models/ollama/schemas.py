"""Ollama's request bodies (``/api/chat``, ``/api/generate``, ``/api/embed``, ``/api/show``)
and the OpenAI request each one asks for.

The node answers Ollama's API as the OpenAI request it amounts to, so routing, the cache,
fallback and the size caps are the same; what Ollama names differently (``options.num_predict``
for ``max_tokens``, ``format`` for ``response_format``, tool arguments as objects) is renamed
here, once.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..openai.schemas import native_sampling, refused

# Ollama's sampling defaults where a request leaves them out (its Modelfile defaults): an Ollama
# client that sends no options gets Ollama's sampler, not OpenAI's temperature 1.0.
DEFAULTS: dict[str, float] = {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.0, "repeat_penalty": 1.1}
LATEST = ":latest"


def model_name(name: str) -> str:
    """The node's model id of an Ollama model name: ``name:latest`` is ``name`` (Ollama's default tag)."""
    return name.removesuffix(LATEST)


def tag_name(model_id: str) -> str:
    """An id as Ollama lists it: with its tag (``:latest`` unless it has one)."""
    return model_id if ":" in model_id.rsplit("/", 1)[-1] else model_id + LATEST


class Options(BaseModel):
    """``options``: the sampling ones are honoured; the runtime's (``num_ctx``, ``num_gpu``,
    ``num_thread``...) and samplers the node does not have (``mirostat``, ``typical_p``, a
    ``repeat_last_n`` other than 64...) are accepted and ignored, as Ollama ignores options a
    model has no use for."""

    model_config = ConfigDict(extra="allow")

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    num_predict: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    num_ctx: int | None = None  # typed so that a wrong type is a 400 like Ollama's, though not used

    def openai_fields(self) -> dict[str, Any]:
        return native_sampling(self, DEFAULTS, max_tokens=self.num_predict, seed=self.seed, stop=self.stop)


class ToolCallFunction(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolCall(BaseModel):
    function: ToolCallFunction


class _TextOnly(BaseModel):
    """``images``: refused, whichever body carries them."""

    images: list[str] | None = None

    _text_only = refused({"images": "images are not accepted: this node's models read text only"})


class ChatMessage(_TextOnly):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None
    thinking: str | None = None  # an earlier answer's reasoning: not read back, as Ollama does not

    def openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": json.dumps(c.function.arguments, ensure_ascii=False)},
                }
                for i, c in enumerate(self.tool_calls)
            ]
            if not self.content:
                message["content"] = None
        if self.tool_name is not None:
            message["name"] = self.tool_name
        return message


class _Generating(BaseModel):
    """What ``/api/chat`` and ``/api/generate`` share. Unknown fields pass on to the OpenAI
    request (the node's ``cache`` and ``private`` switches among them)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    stream: bool = True  # Ollama streams unless told not to
    format: Literal["", "json"] | dict[str, Any] | None = None  # "json": any JSON object; a dict: its JSON Schema
    options: Options = Field(default_factory=Options)
    keep_alive: float | str | None = None  # the node's models stay loaded
    think: bool | Literal["low", "medium", "high"] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None

    _no_thinking = refused({"think": "the node's models do not support thinking"})

    @property
    def unloads(self) -> bool:
        """``keep_alive: 0``: Ollama's way to unload a model (answered ``done_reason: "unload"``)."""
        return self.keep_alive in (0, "0", "0s", "0m")

    def _common(self, chat: bool) -> dict[str, Any]:
        """The OpenAI fields of a chat completion (else of a text completion) but its messages."""
        fields = {**(self.model_extra or {}), **self.options.openai_fields()}
        fields.update(model=model_name(self.model), stream=self.stream, n=1)  # Ollama answers once
        if self.format == "json":
            fields["response_format"] = {"type": "json_object"}
        elif isinstance(self.format, dict):
            schema = {"name": "format", "schema": self.format}
            fields["response_format"] = {"type": "json_schema", "json_schema": schema}
        if self.logprobs and chat:
            fields.update(logprobs=True, top_logprobs=self.top_logprobs or 0)
        elif self.logprobs:
            fields["logprobs"] = self.top_logprobs or 0
        return fields


class OllamaChatBody(_Generating):
    """``POST /api/chat``."""

    messages: Annotated[list[ChatMessage], Field(max_length=20_000)] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None

    def openai_fields(self) -> dict[str, Any]:
        """The OpenAI chat completion this request asks for."""
        fields = self._common(chat=True)
        fields["messages"] = [m.openai() for m in self.messages]
        if self.tools:
            fields["tools"] = self.tools  # the model may answer in text ("auto"), as with OpenAI's API
        return fields


_NO_TEMPLATE = "not supported by this node (its models have neither fill-in-the-middle nor a replaceable template)"
_UNSUPPORTED = {
    "suffix": _NO_TEMPLATE,
    "template": _NO_TEMPLATE,
    "context": "continuing from token context is not supported: send the conversation to /api/chat",
}


class OllamaGenerateBody(_TextOnly, _Generating):
    """``POST /api/generate``: the prompt in the model's chat template (with ``system``), or as
    it is with ``raw``."""

    prompt: str = ""
    system: str | None = None
    raw: bool = False
    suffix: str | None = None
    template: str | None = None
    context: list[int] | None = None

    _unsupported = refused(_UNSUPPORTED)

    def openai_fields(self) -> dict[str, Any]:
        """The OpenAI request it asks for: a text completion (``raw``) or a chat completion."""
        fields = self._common(chat=not self.raw)
        if self.raw:
            fields["prompt"] = self.prompt
        else:
            system = [{"role": "system", "content": self.system}] if self.system else []
            fields["messages"] = [*system, {"role": "user", "content": self.prompt}]
        return fields


class OllamaEmbedBody(BaseModel):
    """``POST /api/embed`` (``input``) and the older ``/api/embeddings`` (``prompt``)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    input: str | Annotated[list[str], Field(max_length=2048)] | None = None
    prompt: str | None = None
    truncate: bool = True
    dimensions: Annotated[int, Field(ge=1)] | None = None
    options: Options = Field(default_factory=Options)
    keep_alive: float | str | None = None

    def texts(self) -> list[str]:
        if self.input is None:
            return [self.prompt or ""]
        return [self.input] if isinstance(self.input, str) else list(self.input)


class OllamaShowBody(BaseModel):
    """``POST /api/show``: ``model`` (older clients send ``name``)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = Field(None, min_length=1, max_length=256)
    name: str | None = Field(None, min_length=1, max_length=256)
    verbose: bool = False

    def model_id(self) -> str | None:
        given = self.model or self.name
        return model_name(given) if given else None
