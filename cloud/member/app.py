"""The member's HTTP surface: the OpenAI API (streaming and not), `/health`, `/metrics`, `/v1/models`.

Errors use OpenAI's body shape and the status codes vLLM uses, so the pool's client treats this
server and vLLM alike (429/5xx retryable, 4xx the request's own fault).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from litestar import Litestar, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException, NotAuthorizedException, ValidationException
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Stream

from ..config import MemberServerSettings
from ..errors import BadRequestError, MemberServerError, OverloadedError, RankFailureError
from .engine import Piece, Plan, TorchEngine
from .metrics import CONTENT_TYPE, MemberMetrics
from .schemas import ChatBody, CompletionBody
from .shards import ShardReport

log = logging.getLogger(__name__)

Kind = Literal["chat", "text"]

# The one table from error class to (status, OpenAI error type) of this server.
_STATUS: tuple[tuple[type[MemberServerError], int, str], ...] = (
    (BadRequestError, 400, "invalid_request_error"),
    (OverloadedError, 503, "server_overloaded"),
    (RankFailureError, 503, "server_error"),
)


def _error(
    message: str, err_type: str, status: int, param: str | None = None, code: str | None = None
) -> Response[Any]:
    body = {"error": {"message": message, "type": err_type, "param": param, "code": code}}
    return Response(body, status_code=status)


def _member_error(_: Request[Any, Any, Any], exc: MemberServerError) -> Response[Any]:
    for cls, status, err_type in _STATUS:
        if isinstance(exc, cls):
            if status == 400 and exc.code == "model_not_found":
                status = 404
            return _error(exc.message, err_type, status, exc.param, exc.code)
    return _error(exc.message, "server_error", 500, exc.param, exc.code)


def _validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    details = exc.extra if isinstance(exc.extra, list) else []
    parts = [f"{d.get('key')}: {d.get('message')}" for d in details if isinstance(d, dict)]
    return _error("; ".join(parts) or str(exc.detail), "invalid_request_error", 400, code="invalid_request")


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    err_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
    return _error(str(exc.detail), err_type, exc.status_code)


def _sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


class _Writer:
    """One response's chunks in the OpenAI (and vLLM) stream shape."""

    def __init__(self, kind: Kind, model: str) -> None:
        self.kind = kind
        self.model = model
        self.rid = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": self.rid,
            "object": "chat.completion.chunk" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            body["usage"] = usage
        return _sse(body)

    def _choice(self, text: str, finish: str | None, role: bool = False) -> dict[str, Any]:
        if self.kind == "chat":
            delta: dict[str, Any] = {"role": "assistant", "content": text} if role else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

    def opening(self) -> bytes:
        return self._chunk([self._choice("", None, role=True)]) if self.kind == "chat" else b""

    def text(self, text: str) -> bytes:
        return self._chunk([self._choice(text, None)])

    def finish(self, piece: Piece, include_usage: bool) -> bytes:
        out = self._chunk([self._choice("", piece.finish_reason)])
        if include_usage:
            out += self._chunk([], _usage(piece))
        return out + b"data: [DONE]\n\n"

    def error(self, exc: MemberServerError) -> bytes:
        body = {"error": {"message": exc.message, "type": "server_error", "param": None, "code": exc.code}}
        return _sse(body) + b"data: [DONE]\n\n"

    def whole(self, text: str, piece: Piece) -> dict[str, Any]:
        if self.kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": piece.finish_reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": piece.finish_reason}
        return {
            "id": self.rid,
            "object": "chat.completion" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": _usage(piece),
        }


def _usage(piece: Piece) -> dict[str, int]:
    return {
        "prompt_tokens": piece.prompt_tokens,
        "completion_tokens": piece.completion_tokens,
        "total_tokens": piece.prompt_tokens + piece.completion_tokens,
    }


def create_member_app(
    engine: TorchEngine, metrics: MemberMetrics, settings: MemberServerSettings, shards: ShardReport
) -> Litestar:
    """The ASGI app of rank 0; ``/health`` also says how the weights are sharded across ranks."""
    served = settings.name

    async def api_key_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        if settings.api_key is None:
            return
        auth = connection.headers.get("authorization", "")
        if auth != f"Bearer {settings.api_key}":
            raise NotAuthorizedException("invalid or missing API key")

    def check_model(model: str) -> None:
        if model != served:
            raise BadRequestError(
                f"the model `{model}` does not exist; this member serves `{served}`",
                param="model",
                code="model_not_found",
            )

    async def respond(kind: Kind, body: ChatBody | CompletionBody, plan: Plan) -> Response[Any]:
        job = engine.submit(plan)
        writer = _Writer(kind, body.model)
        if not body.stream:
            parts: list[str] = []
            last = Piece("")
            async for piece in engine.pieces(job):
                parts.append(piece.text)
                last = piece
            return Response(writer.whole("".join(parts), last))

        async def events() -> AsyncIterator[bytes]:
            yield writer.opening()
            try:
                async for piece in engine.pieces(job):
                    if piece.text:
                        yield writer.text(piece.text)
                    if piece.finish_reason is not None:
                        yield writer.finish(piece, body.include_usage)
            except MemberServerError as exc:  # headers are sent: end the stream with an error event
                yield writer.error(exc)

        return Stream(events(), media_type="text/event-stream", headers={"cache-control": "no-cache"})

    @post("/v1/chat/completions", status_code=200, guards=[api_key_guard])
    async def chat(data: ChatBody) -> Response[Any]:
        check_model(data.model)
        ids = engine.encode_chat(
            data.plain_messages(),
            add_generation_prompt=data.add_generation_prompt,
            continue_final_message=data.continue_final_message,
        )
        plan = engine.plan(
            ids,
            max_tokens=data.max_tokens or data.max_completion_tokens,
            temperature=data.temperature,
            top_p=data.top_p,
            seed=data.seed,
            stops=data.stops(),
            param="messages",
        )
        return await respond("chat", data, plan)

    @post("/v1/completions", status_code=200, guards=[api_key_guard])
    async def completions(data: CompletionBody) -> Response[Any]:
        check_model(data.model)
        plan = engine.plan(
            engine.encode_prompt(data.prompt_text()),
            max_tokens=data.max_tokens,
            temperature=data.temperature,
            top_p=data.top_p,
            seed=data.seed,
            stops=data.stops(),
            param="prompt",
        )
        return await respond("text", data, plan)

    @get("/v1/models", guards=[api_key_guard])
    async def list_models() -> dict[str, Any]:
        card = {
            "id": served,
            "object": "model",
            "created": 0,
            "owned_by": "edgeroute",
            "max_model_len": settings.max_model_len,
        }
        return {"object": "list", "data": [card]}

    @get("/health")
    async def health() -> Response[Any]:
        if not engine.alive:
            return _error(f"the member is going down: {engine.fatal_reason}", "server_error", 503)
        # vLLM answers an empty 200; the pool reads only the status, so the body is free for the
        # evidence that tensor parallelism shards (see shards.py).
        return Response({"status": "ok", "tensor_parallel": shards.as_json()})

    @get("/metrics")
    async def prometheus() -> Response[bytes]:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return Litestar(
        route_handlers=[chat, completions, list_models, health, prometheus],
        exception_handlers={
            MemberServerError: _member_error,
            ValidationException: _validation_error,
            HTTPException: _http_error,
        },
        openapi_config=None,
    )
