"""What the OpenAPI document says each operation answers: the real bodies and every status, and
the declarations the APIs' controllers share (:class:`KeyedController`, :func:`api_post`).

The handlers return ``Response`` objects (their headers come from the routing record), so the
bodies are named here for the schema: OpenAI's are the ``openai`` package's own types (those its
clients read the node's answers with), with the node's own shapes only where it has none (a
base64 embedding, the Responses API's object with the request's settings beside it, the health
body, Ollama's and llama.cpp's native APIs); the API's error body for every error status, and
``text/event-stream`` (Ollama's: JSON lines) beside JSON for the operations that can stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from litestar import Controller, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, Operation, Schema
from litestar.openapi.spec.enums import OpenAPIType
from openai.types import CreateEmbeddingResponse, Embedding, Model
from openai.types.chat import ChatCompletionTokenLogprob
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.shared import ErrorObject
from pydantic import BaseModel

from models.ollama import MEDIA_TYPE
from models.ollama.schemas import ChatMessage

from .guards import BEARER, api_guard, rate_guard


class ErrorBody(BaseModel):
    """OpenAI's error body, for every error status of every operation."""

    error: ErrorObject


class ResponseUsage(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens_details: dict[str, int]


class ResponseObject(BaseModel):
    """The Responses API's response object (the request's settings are repeated beside these)."""

    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["completed", "incomplete"]
    error: None = None
    incomplete_details: dict[str, str] | None  # ``{"reason": "max_output_tokens"}`` when cut
    model: str
    output: list[ResponseOutputMessage | ResponseFunctionToolCall]
    usage: ResponseUsage
    store: bool


class InputItemList(BaseModel):
    """A stored response's input items (messages, function calls and their outputs)."""

    object: Literal["list"]
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response"]
    deleted: bool


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[Model]


class EncodedEmbedding(Embedding):
    embedding: list[float] | str  # type: ignore[assignment]  # a string when `encoding_format` is "base64"


class EmbeddingList(CreateEmbeddingResponse):
    data: list[EncodedEmbedding]  # type: ignore[assignment]


class EdgeHealth(BaseModel):
    model: str
    running: int
    waiting: int


class CloudHealth(BaseModel):
    members: int
    healthy: int


class Health(BaseModel):
    status: Literal["ok"]
    edge: EdgeHealth
    cloud: CloudHealth | None = None


WHY = {
    400: "Invalid request: a malformed body, a field out of range, over a size cap, nested too deep, "
    "longer than the model's context",
    401: "Missing or wrong API key (when the node has keys)",
    404: "Unknown model (`model_not_found`; for embeddings also a node without its embedding model), "
    "or no stored response with this id (`not_found`, `previous_response_not_found`)",
    408: "The body did not arrive within `server.body_timeout_s`",
    413: "The body is over `server.max_body_bytes`",
    429: "The tenant's requests or tokens per minute are spent, or too many requests with a wrong API "
    "key came from this address (`rate_limit_exceeded`; `retry-after` says when to retry)",
    503: "No capacity (`no_capacity`: the edge queue is full and no cloud can take it) or the node "
    "is draining (`draining`); `retry-after` says when to retry",
}


def answers(body: type[Any], *statuses: int, error: type[BaseModel] = ErrorBody) -> dict[int, ResponseSpec]:
    """``body``, and ``error`` bodies for ``statuses``. An operation that checks keys (401) can also
    answer 429, since wrong keys are throttled per client address (models.openai.auth)."""
    listed = sorted({*statuses, 429} if 401 in statuses else set(statuses))
    spec = {s: ResponseSpec(error, description=WHY[s], generate_examples=False) for s in listed}
    return {200: ResponseSpec(body, description="The answer", generate_examples=False), **spec}


# Every status a request with a body can meet on its way: a bad body, the key, an unknown model,
# a slow or big body, the tenant's rate, no capacity.
_BODY_ERRORS = (400, 401, 404, 408, 413, 429, 503)


class KeyedController(Controller):
    """A controller of the node's APIs: the request's id and API key first, the key in the document."""

    guards = [api_guard]
    security = [{BEARER: []}]


def api_post(
    path: str | list[str], summary: str, body: type[Any], *, error: type[BaseModel] = ErrorBody,
    operation_class: type[Operation] = Operation,
) -> post:
    """A POST of the node's APIs: admitted by the tenant's requests per minute before its body is
    read (:func:`~router.guards.rate_guard`, which makes the request's record), 200 with ``body``,
    else ``error`` for every status on the way (a generation's answers pass through
    :func:`router.respond.respond`)."""
    return post(
        path, guards=[rate_guard], summary=summary, status_code=200,
        responses=answers(body, *_BODY_ERRORS, error=error), operation_class=operation_class,
    )


@dataclass
class StreamingOperation(Operation):
    """An operation that answers JSON, or ``text/event-stream`` when the body says ``stream: true``."""

    stream_type: ClassVar[str] = "text/event-stream"
    stream_description: ClassVar[str] = "The answer: JSON, or server-sent events when `stream` is true"
    # One server-sent event (each `data:` line of the stream).
    stream_item: ClassVar[Schema] = Schema(
        type=OpenAPIType.OBJECT,
        properties={
            "data": Schema(
                type=OpenAPIType.STRING,
                description="a chunk as JSON, an error body after the first token, or `[DONE]` (the last)",
            ),
            "event": Schema(type=OpenAPIType.STRING),
            "id": Schema(type=OpenAPIType.STRING),
        },
        required=["data"],
    )

    def __post_init__(self) -> None:
        ok: Any = (self.responses or {}).get("200")
        if ok is not None and ok.content is not None:
            ok.content[self.stream_type] = OpenAPIMediaType(schema=self.stream_item)
            ok.description = self.stream_description


# Ollama's /api.


class OllamaError(BaseModel):
    """Ollama's error body, for every error status of its operations."""

    error: str


class OllamaAnswer(BaseModel):
    """A whole answer (``stream: false``), or a stream's last line: ``message`` for /api/chat,
    ``response`` for /api/generate. Durations are nanoseconds."""

    model: str
    created_at: str
    message: ChatMessage | None = None  # the assistant's
    response: str | None = None
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    logprobs: list[ChatCompletionTokenLogprob] | None = None


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
    return answers(body, *statuses, error=OllamaError)


@dataclass
class NdjsonOperation(StreamingOperation):
    """An Ollama operation that answers JSON, or JSON lines (``application/x-ndjson``) while
    ``stream`` is true, its default."""

    stream_type: ClassVar[str] = MEDIA_TYPE
    stream_description: ClassVar[str] = "The answer: JSON lines while `stream` is true (the default), else one JSON object"
    stream_item: ClassVar[Schema] = Schema(
        type=OpenAPIType.OBJECT,
        description="a piece of the answer (done false), the last line (done true), or an error body",
    )


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
    completion_probabilities: list[ChatCompletionTokenLogprob] | None = None


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
