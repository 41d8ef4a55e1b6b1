"""The OpenAI request bodies: the fields OpenAI defines (and the sampler extensions llama.cpp's
server and vLLM read), written once here; the node's API adds its own (``router.schemas``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..generation import JSON_OBJECT, SamplingParams
from ..schema_bounds import check_schema
from .tools import NamedToolChoice, ToolChoice, ToolDef, ToolUse

Role = Literal["system", "developer", "user", "assistant", "tool"]
MAX_TOKENS_LIMIT = 1_000_000  # beyond any context window: a bigger number is a client bug


def refused(reasons: dict[str, str]) -> Any:
    """A validator of the fields ``reasons`` names: a field given (truthy) is refused with its
    reason, where the node cannot honour what it asks rather than ignore it."""

    def refuse(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
        if value:
            raise ValueError(reasons[str(info.field_name)])
        return value

    return field_validator(*reasons)(refuse)


def with_defaults(body: BaseModel, defaults: dict[str, float]) -> dict[str, Any]:
    """``body``'s settings of the fields ``defaults`` names, its server's default where unset."""
    return {name: default if getattr(body, name) is None else getattr(body, name) for name, default in defaults.items()}


def native_sampling(
    body: BaseModel, defaults: dict[str, float], *, max_tokens: int | None, seed: int | None, stop: Any
) -> dict[str, Any]:
    """The OpenAI sampling fields of an Ollama or llama.cpp body (the server's ``defaults`` where
    unset). A count of new tokens of 0 or less (until the model stops, or the context is full)
    and a negative seed (random) are left out: the node's own cap and sampler stand for them."""
    fields = with_defaults(body, defaults)
    if max_tokens is not None and max_tokens > 0:
        fields["max_tokens"] = max_tokens
    if seed is not None and seed >= 0:
        fields["seed"] = seed
    if stop:
        fields["stop"] = stop
    fields.update(body.model_dump(include={"presence_penalty", "frequency_penalty"}, exclude_none=True))
    return fields


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text"]
    text: str


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Role
    content: str | list[TextPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if self.content is None:
            # An earlier assistant turn that called functions: the model reads the calls it made.
            calls = (self.model_extra or {}).get("tool_calls")
            if self.role == "assistant" and isinstance(calls, list):
                return json.dumps([c.get("function", c) for c in calls if isinstance(c, dict)], ensure_ascii=False)
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


MAX_SCHEMA_CHARS = 16_000  # a schema is a grammar compiled per request: bounded like a prompt


class JsonSchemaSpec(BaseModel):
    """``response_format.json_schema``: a named JSON Schema the answer must match."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    body: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``: free text, any JSON object, or JSON matching a schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaSpec | None = None

    @model_validator(mode="after")
    def _schema_when_asked(self) -> ResponseFormat:
        if self.type == "json_schema":
            if self.json_schema is None:
                raise ValueError("response_format.json_schema is required when type is 'json_schema'")
            if len(self.schema_text() or "") > MAX_SCHEMA_CHARS:
                raise ValueError(f"response_format.json_schema.schema is over {MAX_SCHEMA_CHARS} characters")
            check_schema(self.json_schema.body, "schema")
        return self

    def schema_text(self) -> str | None:
        """The schema as compact JSON text (None for free text); no schema given: any JSON value."""
        if self.type == "text":
            return None
        if self.type == "json_object" or self.json_schema is None:
            return JSON_OBJECT
        body = self.json_schema.body if self.json_schema.body is not None else {}
        try:
            # Key order kept: the converters emit properties in the schema's order.
            return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        except RecursionError as exc:
            raise ValueError("response_format.json_schema.schema is nested too deeply") from exc


class StreamOptions(BaseModel):
    include_usage: bool = False


class SamplingBody(BaseModel):
    """Fields shared by chat and text completions; unknown OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    n: Annotated[int, Field(ge=1, le=1)] = 1
    frequency_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    logit_bias: Annotated[dict[str, Annotated[float, Field(ge=-100.0, le=100.0)]], Field(max_length=1024)] | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    # A 64-bit signed integer, as vLLM bounds it: a member's torch generator takes no more.
    seed: Annotated[int, Field(ge=-(2**63), le=2**63 - 1)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    # llama.cpp's server's and vLLM's sampler extensions (not OpenAI's); repetition_penalty is
    # vLLM's name of repeat_penalty.
    top_k: Annotated[int, Field(ge=-1, le=1_000_000)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    repeat_penalty: Annotated[float, Field(gt=0.0, le=10.0)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0.0, le=10.0)] | None = None

    @field_validator("logit_bias")
    @classmethod
    def _bias_keys_are_token_ids(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key in value or {}:
            # ASCII digits only: str.isdigit() also takes "²" and "١٢", which int() refuses or reads
            # as another number.
            if not (key.isascii() and key.isdigit()) or len(key) > 9:
                raise ValueError(f"logit_bias keys are token ids (0 or more, as strings); got {key[:20]!r}")
        return value

    @model_validator(mode="after")
    def _one_repeat_penalty(self) -> SamplingBody:
        both = (self.repeat_penalty, self.repetition_penalty)
        if None not in both and both[0] != both[1]:
            raise ValueError("repeat_penalty and repetition_penalty are one setting (llama.cpp's and vLLM's names): send one")
        return self

    def stops(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            stop=self.stops(),
            seed=self.seed,
            frequency_penalty=self.frequency_penalty or 0.0,
            presence_penalty=self.presence_penalty or 0.0,
            logit_bias=tuple(sorted((int(k), float(v)) for k, v in (self.logit_bias or {}).items() if v)),
            json_schema=self.response_format.schema_text() if self.response_format else None,
            top_k=self.top_k,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty or self.repetition_penalty or 1.0,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatBody(SamplingBody):
    """``POST /v1/chat/completions``."""

    messages: Annotated[list[Message], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    tools: Annotated[list[ToolDef], Field(max_length=128)] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None  # one call per answer either way

    @model_validator(mode="after")
    def _newer_max_tokens(self) -> ChatBody:
        if self.max_tokens is None and self.max_completion_tokens is not None:
            self.max_tokens = self.max_completion_tokens
        return self

    @model_validator(mode="after")
    def _top_logprobs_with_logprobs(self) -> ChatBody:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    @model_validator(mode="after")
    def _tool_choice_names_a_tool(self) -> ChatBody:
        names = [t.function.name for t in self.tools or ()]
        if len(set(names)) != len(names):
            raise ValueError("tools: each function needs its own name")
        choice = self.tool_choice
        if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
            raise ValueError(f"tool_choice names the function {choice.function.name!r}, which is not in tools")
        if choice == "required" and not names:
            raise ValueError("tool_choice 'required' needs at least one tool in tools")
        use = self.tool_use()
        try:
            too_big = use is not None and len(use.schema()) > MAX_SCHEMA_CHARS
        except RecursionError as exc:
            raise ValueError("tools: a function's parameters are nested too deeply") from exc
        if too_big:
            raise ValueError(f"tools: the functions' parameters are over {MAX_SCHEMA_CHARS} characters as JSON")
        return self

    @field_validator("tools")
    @classmethod
    def _tools_bounded(cls, tools: list[ToolDef] | None) -> list[ToolDef] | None:
        # All the functions become one grammar: their counts add up.
        units = 0
        for i, tool in enumerate(tools or ()):
            units += check_schema(tool.function.parameters, f"tools[{i}].function.parameters", spent=units)
        return tools

    def tool_use(self) -> ToolUse | None:
        """How the answer may or must call ``tools`` (None: it answers in text). No
        ``tool_choice`` with tools is ``"auto"``, as OpenAI defaults."""
        choice = self.tool_choice
        if not self.tools or choice == "none":
            return None
        functions = tuple(t.function for t in self.tools)
        if isinstance(choice, NamedToolChoice):
            return ToolUse(functions, choice.function.name)
        if choice == "required":
            return ToolUse(functions)
        reply_schema = self.response_format.schema_text() if self.response_format is not None else None
        return ToolUse(functions, auto=True, reply_schema=reply_schema)

    def sampling(self) -> SamplingParams:
        params = super().sampling()
        if self.logprobs:
            params = dataclasses.replace(params, logprobs=self.top_logprobs or 0)
        use = self.tool_use()
        return params if use is None else dataclasses.replace(params, json_schema=use.schema(), schema_field="tools")

    def plain_messages(self) -> tuple[dict[str, str], ...]:
        """The messages as role and text (content parts joined); the tools' instruction joins the
        system message (or opens the conversation as one)."""
        messages = [{"role": m.role, "content": m.text()} for m in self.messages]
        use = self.tool_use()
        if use is not None:
            if messages[0]["role"] in ("system", "developer"):
                messages[0] = {"role": messages[0]["role"], "content": messages[0]["content"] + "\n\n" + use.instruction()}
            else:
                messages.insert(0, {"role": "system", "content": use.instruction()})
        return tuple(messages)


class CompletionBody(SamplingBody):
    """``POST /v1/completions``."""

    prompt: str | Annotated[list[str], Field(min_length=1, max_length=1)]
    logprobs: Annotated[int, Field(ge=0, le=5)] | None = None  # the legacy API's: alternatives per token

    def prompt_text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

    def sampling(self) -> SamplingParams:
        params = super().sampling()
        return params if self.logprobs is None else dataclasses.replace(params, logprobs=self.logprobs)
