"""What the OpenAPI document says each operation answers: the real bodies and every status.

The handlers return ``Response`` objects (their headers come from the routing record), so the
shapes are written here for the schema alone: OpenAI's error body for every error status, the
completion bodies, and ``text/event-stream`` beside JSON for the operations that can stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType
from litestar.openapi.spec import Operation, Schema
from litestar.openapi.spec.enums import OpenAPIType
from pydantic import BaseModel


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    """OpenAI's error body, for every error status of every operation."""

    error: ErrorDetail


class UsageBody(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class FunctionCallBody(BaseModel):
    name: str
    arguments: str  # JSON text


class ToolCallBody(BaseModel):
    id: str
    type: Literal["function"]
    function: FunctionCallBody


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None  # None for a function call (then ``tool_calls``)
    refusal: None = None
    tool_calls: list[ToolCallBody] | None = None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprobBody(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    content: list[TokenLogprobBody]
    refusal: None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None  # when the request set ``logprobs``
    finish_reason: str


class ChatCompletionBody(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageBody
    system_fingerprint: None = None


class TextLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class TextChoice(BaseModel):
    index: int
    text: str
    logprobs: TextLogprobs | None = None  # when the request set ``logprobs``
    finish_reason: str


class TextCompletionBody(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChoice]
    usage: UsageBody
    system_fingerprint: None = None


class OutputText(BaseModel):
    type: Literal["output_text"]
    text: str
    annotations: list[Any]
    logprobs: list[TokenLogprobBody]  # empty unless ``include`` asked for them


class OutputMessage(BaseModel):
    id: str
    type: Literal["message"]
    status: Literal["completed", "incomplete"]
    role: Literal["assistant"]
    content: list[OutputText]


class OutputFunctionCall(BaseModel):
    """A function call (``tool_choice`` ``"auto"``, ``"required"`` or a named function)."""

    id: str
    type: Literal["function_call"]
    status: Literal["completed", "incomplete"]
    call_id: str
    name: str
    arguments: str  # JSON text


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
    output: list[OutputMessage | OutputFunctionCall]
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


class ModelEntry(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelEntry]


class EmbeddingEntry(BaseModel):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # a string when `encoding_format` is "base64"


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(BaseModel):
    object: Literal["list"]
    data: list[EmbeddingEntry]
    model: str
    usage: EmbeddingUsage


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


def listed(*statuses: int) -> list[int]:
    """``statuses`` as documented: an operation that checks keys (401) can also answer 429, since
    wrong keys are throttled per client address (models.openai.auth)."""
    return sorted({*statuses, 429} if 401 in statuses else set(statuses))


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAI error bodies for ``statuses`` (see :func:`listed`)."""
    return {s: ResponseSpec(ErrorBody, description=WHY[s], generate_examples=False) for s in listed(*statuses)}


def answers(body: type[BaseModel], *statuses: int) -> dict[int, ResponseSpec]:
    return {200: ResponseSpec(body, description="The answer", generate_examples=False), **errors(*statuses)}


COMPLETION_ERRORS = (400, 401, 404, 408, 413, 429, 503)


@dataclass
class StreamingOperation(Operation):
    """An operation that answers JSON, or ``text/event-stream`` when the body says ``stream: true``."""

    def __post_init__(self) -> None:
        ok: Any = (self.responses or {}).get("200")
        if ok is not None and ok.content is not None:
            # One server-sent event (each `data:` line of the stream).
            event = Schema(
                type=OpenAPIType.OBJECT,
                properties={
                    "data": Schema(
                        type=OpenAPIType.STRING,
                        description="a chunk as JSON, an error body after the first token, "
                        "or `[DONE]` (the last)",
                    ),
                    "event": Schema(type=OpenAPIType.STRING),
                    "id": Schema(type=OpenAPIType.STRING),
                },
                required=["data"],
            )
            ok.content["text/event-stream"] = OpenAPIMediaType(schema=event)
            ok.description = "The answer: JSON, or server-sent events when `stream` is true"

