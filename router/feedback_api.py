"""``POST /v1/feedback``: a client or an operator rates an answer this node returned.

The id is the ``id`` of a chat completion, completion or response. A tenant key rates its own
tenant's answers; an operator key any tenant's. An unknown id and another tenant's answer are
the same 404 (so is every id on a node whose cache is off: it keeps no record of its answers). The rating is stored with the cache's decision for that answer and, on a semantic
hit, moves the tenant's serving rule (:mod:`edge.cache.feedback`). Ratings count against the
tenant's requests per minute as every other ``/v1`` request does (:func:`router.guards.rate_guard`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Request, Response
from litestar.datastructures import State
from pydantic import BaseModel, ConfigDict, Field

from edge import CacheError

from . import openapi
from .errors import NotFoundError, StoreError
from .node import Node


class FeedbackRequest(BaseModel):
    """A rating of one answer."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(min_length=1, max_length=128, description="the id of an answer this node returned")]
    rating: Literal["right", "wrong"]
    note: Annotated[str | None, Field(max_length=2000)] = None


class FeedbackRecord(BaseModel):
    """The stored rating and the decision it rates."""

    id: str
    object: Literal["feedback"]
    tenant: str
    rating: Literal["right", "wrong"]
    note: str | None
    rated_at: float
    rated_by: Literal["tenant", "operator"]
    route: str  # cache-exact, cache-semantic, edge, cloud
    entry_id: int | None
    query: str | None
    similarity: float | None
    verifier: float | None
    threshold: float | None
    served_at: float


class FeedbackController(openapi.KeyedController):
    path = "/v1/feedback"
    tags = ["edgeroute"]

    # The API key, then the tenant's requests per minute: a loop of ratings meets 429 as a loop of
    # completions does, before its body is read.
    @openapi.api_post(
        "/",
        "Rate an answer this node returned (right or wrong); the rating is stored with its cache decision",
        FeedbackRecord,
    )
    async def rate(
        self, request: Request[Any, Any, State], data: FeedbackRequest
    ) -> Response[dict[str, Any]]:
        node: Node = request.app.state.node
        if node.cache is None:  # no record of any answer is kept: every id is unknown here
            raise _unknown(data.id)
        operator = bool(request.state.get("operator", False))
        tenant = None if operator else request.state.get("tenant", "default")
        try:
            record = await node.cache.rate(data.id, tenant, data.rating, data.note, "operator" if operator else "tenant")
        except CacheError as exc:
            raise StoreError(f"the rating could not be stored: {exc}", code="feedback_unavailable") from exc
        if record is None:
            raise _unknown(data.id)
        return Response(record, headers=request.state.record.ratelimit)  # the request record (rate_guard)


def _unknown(answer_id: str) -> NotFoundError:
    return NotFoundError(f"No answer with id {answer_id!r} was found.", param="id", code="not_found")
