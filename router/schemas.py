"""The OpenAI-compatible request bodies, validated once at the door."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from models import GenerationRequest, SamplingParams

Role = Literal["system", "developer", "user", "assistant", "tool"]
MAX_TOKENS_LIMIT = 1_000_000  # beyond any context window: a bigger number is a client bug


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
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    include_usage: bool = False


class _Common(BaseModel):
    """Fields shared by chat and text completions; unknown OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field("auto", min_length=1, max_length=256)
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    n: Annotated[int, Field(ge=1, le=1)] = 1
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # edgeroute extensions (also settable by headers)
    cache: bool | None = None
    private: bool | None = None

    @field_validator("stop")
    @classmethod
    def _stop_not_empty(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, str) and not value:
            raise ValueError("stop must not be an empty string")
        if isinstance(value, list) and any(not s for s in value):
            raise ValueError("stop sequences must not be empty strings")
        return value

    def sampling(self) -> SamplingParams:
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        return SamplingParams(
            max_tokens=self.max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            stop=stop,
            seed=self.seed,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(_Common):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None

    @model_validator(mode="after")
    def _newer_max_tokens(self) -> ChatCompletionRequest:
        if self.max_tokens is None and self.max_completion_tokens is not None:
            self.max_tokens = self.max_completion_tokens
        return self

    def to_generation(self, model: str) -> GenerationRequest:
        return GenerationRequest(
            params=self.sampling(),
            messages=tuple({"role": m.role, "content": m.text()} for m in self.messages),
            model=model,
        )


class CompletionRequest(_Common):
    prompt: str | Annotated[list[str], Field(min_length=1, max_length=1)]
    echo: bool = False
    suffix: str | None = None

    def prompt_text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

    def to_generation(self, model: str) -> GenerationRequest:
        return GenerationRequest(params=self.sampling(), prompt=self.prompt_text(), model=model)


def dump_extra(body: BaseModel) -> dict[str, Any]:
    """Fields the client sent that the schema does not know (kept for cache keys and logs)."""
    return dict(body.model_extra or {})
