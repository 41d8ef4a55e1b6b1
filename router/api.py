"""The OpenAI-compatible HTTP surface: /v1/chat/completions, /v1/completions, /v1/models, /healthz."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Stream

from models import Completion, GenerationRequest, Usage

from .errors import AuthenticationError
from .node import Node, RequestContext
from .openai_format import ChunkWriter, Kind, completion_body, new_id
from .schemas import ChatCompletionRequest, CompletionRequest, dump_extra

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


async def api_key_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Check the API key before the body is read, and resolve the tenant.

    Async on purpose: Litestar runs a sync guard in a worker thread, a hop on every request.
    """
    keys: dict[str, str] = connection.app.state.node.settings.server.api_keys
    auth = connection.headers.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
    if keys:
        if token is None or token not in keys:
            raise AuthenticationError("invalid or missing API key", code="invalid_api_key")
        connection.state.tenant = keys[token]
    else:
        connection.state.tenant = connection.headers.get("x-edgeroute-tenant") or "default"


def request_context(request: Request[Any, Any, State], body: ChatCompletionRequest | CompletionRequest) -> RequestContext:
    """The tenant (set by the guard) and the per-request switches."""
    tenant = request.state.get("tenant", "default")
    header_cache = _flag(request.headers.get("x-edgeroute-cache"))
    header_private = _flag(request.headers.get("x-edgeroute-private"))
    cache = body.cache if body.cache is not None else header_cache
    private = bool(body.private) or bool(header_private)
    extra = {k: v for k, v in dump_extra(body).items() if k not in _NOT_IN_KEY}
    return RequestContext(tenant=tenant, cache=cache, private=private, stream=body.stream, extra=extra)


# Fields that never change the answer's text, so they stay out of the cache key.
_NOT_IN_KEY = {"cache", "private", "user", "stream", "stream_options", "n", "metadata", "store"}


async def _respond(
    node: Node, kind: Kind, gen: GenerationRequest, ctx: RequestContext, stream: bool, include_usage: bool
) -> Response[Any]:
    started = time.perf_counter()
    routed = await node.run(gen, ctx)
    rid = new_id(kind)
    if not stream:
        parts: list[str] = []
        finish, usage = "stop", Usage(0, 0)
        async for chunk in routed.chunks():
            parts.append(chunk.text)
            finish = chunk.finish_reason or finish
            usage = chunk.usage or usage
        done = Completion("".join(parts), finish, usage)
        body = completion_body(kind, rid, gen.model, done.text, done.finish_reason, done.usage)
        headers = routed.response_headers()  # after the last chunk: a fallback mid-way shows
        headers["x-edgeroute-latency-ms"] = f"{(time.perf_counter() - started) * 1000:.1f}"
        return Response(body, headers=headers)

    writer = ChunkWriter(kind, rid, gen.model, include_usage)

    async def events() -> AsyncIterator[bytes]:
        try:
            async for chunk in routed.chunks():
                if chunk.text:
                    yield writer.text(chunk.text)
                if chunk.finish_reason is not None:
                    yield writer.finish(chunk.finish_reason, chunk.usage or Usage(0, 0))
                    return
        except Exception as exc:  # noqa: BLE001 - headers are sent; the stream must end cleanly
            yield writer.error(f"generation failed: {exc}")

    return Stream(
        events(),
        media_type="text/event-stream",
        headers={**routed.response_headers(), "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


class OpenAIController(Controller):
    path = "/v1"
    tags = ["openai"]
    guards = [api_key_guard]

    @post("/chat/completions", summary="Create a chat completion", status_code=200)
    async def chat_completions(self, request: Request[Any, Any, State], data: ChatCompletionRequest) -> Response[Any]:
        node: Node = request.app.state.node
        ctx = request_context(request, data)
        return await _respond(node, "chat", data.to_generation(data.model), ctx, data.stream, data.include_usage)

    @post("/completions", summary="Create a text completion", status_code=200)
    async def completions(self, request: Request[Any, Any, State], data: CompletionRequest) -> Response[Any]:
        node: Node = request.app.state.node
        ctx = request_context(request, data)
        return await _respond(node, "text", data.to_generation(data.model), ctx, data.stream, data.include_usage)

    @get("/models", summary="List the model ids a client may send")
    async def models(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        node: Node = request.app.state.node
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "edgeroute"} for m in node.model_ids()]
        return {"object": "list", "data": data}


@get("/healthz", summary="Liveness and the edge's load", tags=["ops"])
async def healthz(request: Request[Any, Any, State]) -> dict[str, Any]:
    node: Node = request.app.state.node
    load = node.edge.load()
    body: dict[str, Any] = {
        "status": "ok",
        "edge": {"model": node.edge_model, "running": load.running, "waiting": load.waiting},
    }
    if node.pool is not None:
        members = node.pool.status()
        body["cloud"] = {"members": len(members), "healthy": sum(1 for m in members if m.healthy)}
    return body
