"""What the OpenAPI document says the native APIs answer: Ollama's (``/api``: its bodies, its
error body, JSON lines when it streams) and llama.cpp's server's own (``/completion``,
``/props``). OpenAI's operations: :mod:`router.openapi`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, Operation, Schema
from litestar.openapi.spec.enums import OpenAPIType
from pydantic import BaseModel

from .openapi import WHY, TokenLogprobBody, listed


class OllamaError(BaseModel):
    """Ollama's error body, for every error status of its operations."""

    error: str


class OllamaMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class OllamaAnswer(BaseModel):
    """A whole answer (``stream: false``), or a stream's last line: ``message`` for /api/chat,
    ``response`` for /api/generate. Durations are nanoseconds."""

    model: str
    created_at: str
    message: OllamaMessage | None = None
    response: str | None = None
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    logprobs: list[TokenLogprobBody] | None = None


class OllamaEmbeddings(BaseModel):
    model: str
    embeddings: list[list[float]]
    total_duration: int
    load_duration: int
    prompt_eval_count: int


class OllamaEmbedding(BaseModel):
    embedding: list[float]


class OllamaDetails(BaseModel):
    parent_model: str
    format: str
    family: str
    families: list[str] | None
    parameter_size: str
    quantization_level: str


class OllamaModel(BaseModel):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: OllamaDetails
    expires_at: str | None = None  # /api/ps
    size_vram: int | None = None
    context_length: int | None = None


class OllamaTags(BaseModel):
    models: list[OllamaModel]


class OllamaShow(BaseModel):
    modelfile: str
    parameters: str
    template: str
    details: OllamaDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


class OllamaVersion(BaseModel):
    version: str


def ollama_answers(body: type[BaseModel], *statuses: int) -> dict[int, ResponseSpec]:
    """An Ollama operation's answers: ``body``, and Ollama's error body for ``statuses``."""
    spec = {s: ResponseSpec(OllamaError, description=WHY[s], generate_examples=False) for s in listed(*statuses)}
    return {200: ResponseSpec(body, description="The answer", generate_examples=False), **spec}


@dataclass
class NdjsonOperation(Operation):
    """An Ollama operation that answers JSON, or JSON lines (``application/x-ndjson``) while
    ``stream`` is true, its default."""

    def __post_init__(self) -> None:
        ok: Any = (self.responses or {}).get("200")
        if ok is not None and ok.content is not None:
            line = Schema(
                type=OpenAPIType.OBJECT,
                description="a piece of the answer (done false), the last line (done true), or an error body",
            )
            ok.content["application/x-ndjson"] = OpenAPIMediaType(schema=line)
            ok.description = "The answer: JSON lines while `stream` is true (the default), else one JSON object"


# llama.cpp's own /completion and /props.


class LlamaTimings(BaseModel):
    prompt_n: int
    prompt_ms: float
    prompt_per_second: float | None
    predicted_n: int
    predicted_ms: float
    predicted_per_second: float | None


class LlamaCompletion(BaseModel):
    """A whole answer, or a stream's last event (``stop: true``; earlier ones carry a piece of
    ``content`` with ``stop: false``)."""

    index: int
    content: str
    tokens: list[int]
    id_slot: int
    stop: bool
    model: str
    tokens_predicted: int
    tokens_evaluated: int
    generation_settings: dict[str, Any]
    prompt: str
    has_new_line: bool
    truncated: bool
    stop_type: Literal["eos", "limit", "word"]
    stopping_word: str
    tokens_cached: int
    timings: LlamaTimings
    completion_probabilities: list[TokenLogprobBody] | None = None


class LlamaGenerationDefaults(BaseModel):
    n_ctx: int
    params: dict[str, Any]


class LlamaProps(BaseModel):
    default_generation_settings: LlamaGenerationDefaults
    total_slots: int
    model_alias: str
    model_path: str
    chat_template: str
    modalities: dict[str, bool]
    build_info: str
