"""The member's HTTP surface: the OpenAI API (streaming and not), `/health`, `/metrics`, `/v1/models`.

Requests, responses and errors are written by :mod:`models.openai`, as the node's own API is:
OpenAI's body shapes and the status codes vLLM uses, so the pool's client treats this server
and vLLM alike (429/5xx retryable, 4xx the request's own fault).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from litestar import Litestar, Response, get, post
from litestar.datastructures import State
from litestar.response import Stream

from models import SamplingParams, TokenLogprob, Usage
from models.keys import KeyTable
from models.openai import API_KEYS, ChunkWriter, Kind, api_key_guard, error_body, exception_handlers

from ..config import MemberServerSettings
from ..errors import BadRequestError, MemberServerError
from .engine import Piece, Plan, TorchEngine
from .metrics import CONTENT_TYPE, MemberMetrics
from .schemas import MemberChatBody, MemberCompletionBody
from .shards import ShardReport

log = logging.getLogger(__name__)


def _usage(piece: Piece) -> Usage:
    return Usage(piece.prompt_tokens, piece.completion_tokens)


def create_member_app(
    engine: TorchEngine, metrics: MemberMetrics, settings: MemberServerSettings, shards: ShardReport
) -> Litestar:
    """The ASGI app of rank 0; ``/health`` also says how the weights are sharded across ranks."""
    served = settings.name

    def check_model(model: str) -> None:
        if model != served:
            raise BadRequestError(
                f"the model `{model}` does not exist; this member serves `{served}`",
                param="model",
                code="model_not_found",
            )

    async def respond(kind: Kind, body: MemberChatBody | MemberCompletionBody, plan: Plan) -> Response[Any]:
        job = engine.submit(plan)
        call = body.tool_use() if isinstance(body, MemberChatBody) else None
        writer = ChunkWriter(
            kind, body.model, include_usage=body.include_usage, call=call, logprobs=plan.logprobs is not None
        )
        if not body.stream:
            parts: list[str] = []
            logprobs: list[TokenLogprob] = []
            last = Piece("")
            async for piece in engine.pieces(job):
                parts.append(piece.text)
                logprobs.extend(piece.logprobs)
                last = piece
            return Response(
                writer.whole("".join(parts), last.finish_reason or "stop", _usage(last), logprobs, last.stop_word)
            )

        async def events() -> AsyncIterator[bytes]:
            yield writer.opening()
            try:
                async for piece in engine.pieces(job):
                    if piece.text:
                        yield writer.text(piece.text, piece.logprobs)
                    if piece.finish_reason is not None:
                        yield writer.finish(piece.finish_reason, _usage(piece), stop_word=piece.stop_word)
            except MemberServerError as exc:  # headers are sent: end the stream with an error event
                yield writer.error(exc.message, code=exc.code)

        return Stream(events(), media_type="text/event-stream", headers={"cache-control": "no-cache"})

    async def _plan(ids: list[int], params: SamplingParams, param: str, prefix: str) -> Plan:
        if params.json_schema is None:
            return engine.plan(ids, params, param=param, prefix=prefix)
        # Compiling a schema takes milliseconds to (for a big one) a second: off the event loop.
        return await asyncio.to_thread(engine.plan, ids, params, param=param, prefix=prefix)

    @post("/v1/chat/completions", status_code=200, guards=[api_key_guard])
    async def chat(data: MemberChatBody) -> Response[Any]:
        check_model(data.model)
        params = data.sampling()
        messages = list(data.plain_messages())
        ids = engine.encode_chat(
            messages,
            add_generation_prompt=data.add_generation_prompt,
            continue_final_message=data.continue_final_message,
        )
        # A continuation extends the final assistant message: a grammar must read it first.
        prefix = messages[-1]["content"] if data.continue_final_message else ""
        plan = await _plan(ids, params, "messages", prefix)
        return await respond("chat", data, plan)

    @post("/v1/completions", status_code=200, guards=[api_key_guard])
    async def completions(data: MemberCompletionBody) -> Response[Any]:
        check_model(data.model)
        plan = await _plan(engine.encode_prompt(data.prompt_text()), data.sampling(), "prompt", "")
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
            body = error_body(f"the member is going down: {engine.fatal_reason}", "server_error")
            return Response(body, status_code=503)
        # vLLM answers an empty 200; the pool reads only the status, so the body is free for the
        # evidence that tensor parallelism shards (see shards.py) and for the weights' dtype.
        return Response({"status": "ok", "dtype": engine.dtype, "tensor_parallel": shards.as_json()})

    @get("/metrics")
    async def prometheus() -> Response[bytes]:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return Litestar(
        route_handlers=[chat, completions, list_models, health, prometheus],
        state=State({API_KEYS: KeyTable.of({settings.api_key: "default"} if settings.api_key else {})}),
        exception_handlers=exception_handlers(),
        openapi_config=None,
    )
