"""OpenAI's Responses API: ``POST /v1/responses`` (answered as the chat completion it asks for,
:func:`router.respond.respond`), and its stored responses: ``GET`` and ``DELETE
/v1/responses/{id}``, its ``input_items``, and ``previous_response_id`` to continue one.

A response is stored (``<data_dir>/responses.db``, :mod:`router.responses_store`) before its
last event or its body reaches the client, unless ``store`` is false; each tenant sees only its
own.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from litestar import Request, Response, delete, get
from litestar.datastructures import State
from litestar.params import Parameter

from models import GenerationRequest
from models.openai import ResponseWriter
from models.openai.responses import output_messages

from . import openapi
from .errors import InvalidRequestError, NotFoundError, StoreError
from .node import Node
from .respond import MakeWriter, respond
from .responses_store import ResponseStore
from .schemas import ChatCompletionRequest, CompletionRequest, ResponsesRequest

log = logging.getLogger(__name__)


def _store(request: Request[Any, Any, State]) -> tuple[ResponseStore, str]:
    node: Node = request.app.state.node
    return node.responses, request.state.get("tenant", "default")


def _writer(data: ResponsesRequest) -> MakeWriter:
    def make(body: ChatCompletionRequest | CompletionRequest, gen: GenerationRequest) -> ResponseWriter:
        call = body.tool_use() if isinstance(body, ChatCompletionRequest) else None
        return ResponseWriter(gen.model, data.echo(), call=call, logprobs=gen.params.logprobs is not None)

    return make


def _missing(response_id: str) -> NotFoundError:
    return NotFoundError(f"Response with id {response_id!r} not found.", param="response_id", code="not_found")


class ResponsesController(openapi.KeyedController):
    path = "/v1/responses"
    tags = ["openai"]

    @openapi.api_post(
        "/", "Create a response (OpenAI's Responses API; stored unless store is false)",
        openapi.ResponseObject, operation_class=openapi.StreamingOperation,
    )
    async def create(self, request: Request[Any, Any, State], data: ResponsesRequest) -> Response[Any]:
        store, tenant = _store(request)
        prior: list[dict[str, Any]] = []
        chat = data.chat
        if data.previous_response_id is not None:
            found = await store.get(tenant, data.previous_response_id)
            if found is None:
                raise NotFoundError(
                    f"Previous response with id {data.previous_response_id!r} not found.",
                    param="previous_response_id", code="previous_response_not_found",
                )
            prior = found[1]
            chat = data.to_chat(prior)
        if data.store is False:
            return await respond(request, chat, _writer(data))
        conversation = [*prior, *data.input_messages()]
        items = data.input_items()

        async def keep(final: dict[str, Any]) -> None:
            try:
                await store.put(tenant, final, conversation + output_messages(final["output"]), items)
            except StoreError:  # the answer still goes out; only its continuation is lost
                log.exception("storing response %s failed", final.get("id"))

        return await respond(request, chat, _writer(data), after=keep)

    @get(
        "/{response_id:str}",
        summary="Retrieve a stored response",
        responses=openapi.answers(openapi.ResponseObject, 401, 404, 503),
    )
    async def retrieve(self, request: Request[Any, Any, State], response_id: str) -> dict[str, Any]:
        store, tenant = _store(request)
        found = await store.get(tenant, response_id)
        if found is None:
            raise _missing(response_id)
        return found[0]

    @get(
        "/{response_id:str}/input_items",
        summary="List a stored response's input items (newest first unless order is asc)",
        responses=openapi.answers(openapi.InputItemList, 400, 401, 404, 503),
    )
    async def input_items(
        self,
        request: Request[Any, Any, State],
        response_id: str,
        order: Literal["asc", "desc"] = "desc",
        limit: Annotated[int, Parameter(ge=1, le=100)] = 20,
        after: str | None = None,
    ) -> dict[str, Any]:
        store, tenant = _store(request)
        items = await store.input_items(tenant, response_id)
        if items is None:
            raise _missing(response_id)
        if order == "desc":
            items.reverse()
        if after is not None:
            ids = [item.get("id") for item in items]
            if after not in ids:
                raise InvalidRequestError(f"no input item {after!r} in response {response_id!r}", param="after")
            items = items[ids.index(after) + 1 :]
        page = items[:limit]
        return {
            "object": "list", "data": page, "has_more": len(items) > limit,
            "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None,
        }

    @delete(
        "/{response_id:str}",
        summary="Delete a stored response",
        status_code=200,
        responses=openapi.answers(openapi.DeletedResponse, 401, 404, 503),
    )
    async def remove(self, request: Request[Any, Any, State], response_id: str) -> dict[str, Any]:
        store, tenant = _store(request)
        if not await store.delete(tenant, response_id):
            raise _missing(response_id)
        return {"id": response_id, "object": "response", "deleted": True}
