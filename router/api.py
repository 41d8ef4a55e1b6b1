"""The OpenAI-compatible HTTP surface: /v1/chat/completions, /v1/completions, /v1/embeddings,
/v1/models, /healthz (the Responses API: :mod:`router.responses_api`).

A handler reads the request (body, tenant, switches) and hands it to :func:`router.pipeline.run`
(once per choice: :mod:`router.choices`);
what comes back is written in OpenAI's wire format (:mod:`models.openai`). Embeddings are not
routed: the node's embedder answers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

from litestar import Controller, MediaType, Request, Response, get, head, post
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.response import Stream

from models import GenerationRequest, Usage
from models.ollama import NdjsonWriter
from models.openai import ChunkWriter, EmbeddingsBody, Kind, ResponseWriter, api_key_guard, embedding_list

from . import choices, openapi
from .admission import Drain
from .errors import ClientGoneError, InvalidRequestError
from .limits import check_inputs, check_messages, check_prompt
from .node import Node
from .offload import off_loop
from .pipeline import RequestContext, Routing
from .schemas import ChatCompletionRequest, CompletionRequest, dump_extra

T = TypeVar("T")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Fields that never change the answer's text, so they stay out of the cache key.
_NOT_IN_KEY = {"cache", "private", "user", "stream", "stream_options", "n", "metadata", "store"}
# A client's own request id is kept when it looks like one (it goes into logs and upstream headers).
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
REQUEST_ID_HEADER = "x-request-id"
# The OpenAPI security scheme of /v1 (defined on the app: router.app.BEARER_SCHEME).
BEARER = "bearer"


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


async def request_id_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Give the request its id before anything can fail (errors carry it too): the client's
    ``x-request-id`` when it sent a sane one, else a new one."""
    given = connection.headers.get(REQUEST_ID_HEADER)
    connection.state.request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def request_context(request: Request[Any, Any, State], body: ChatCompletionRequest | CompletionRequest) -> RequestContext:
    """The tenant (set by the API-key guard) and the per-request switches (body over headers)."""
    header_cache = _flag(request.headers.get("x-edgeroute-cache"))
    header_private = _flag(request.headers.get("x-edgeroute-private"))
    return RequestContext(
        tenant=request.state.get("tenant", "default"),
        cache=body.cache if body.cache is not None else header_cache,
        private=bool(body.private) or bool(header_private),
        stream=body.stream,
        extra={k: v for k, v in dump_extra(body).items() if k not in _NOT_IN_KEY},
    )


async def text_prompts(node: Node, body: CompletionRequest) -> CompletionRequest:
    """A prompt given as token ids, as the text they are (the edge model's ids, as /tokenize gives
    them): it is routed, cached and generated like the text, on the edge or a member alike."""
    ids = body.token_prompts()
    if ids is None:
        return body
    vocab = node.edge.n_vocab
    texts: list[str] = []
    for tokens in ids:
        bad = next((t for t in tokens if t >= vocab), None)
        if bad is not None:
            raise InvalidRequestError(
                f"prompt token id {bad} is beyond the vocabulary of {node.edge_model} ({vocab} tokens): token-id "
                "prompts are the edge model's ids", param="prompt", code="invalid_value",
            )
        texts.append(await off_loop(len(tokens) * 4, lambda tokens=tokens: node.edge.text_of_prompt(tokens)))
    single = isinstance(body.prompt, list) and isinstance(body.prompt[0], int)
    return body.model_copy(update={"prompt": texts[0] if single else texts})


def _check_caps(node: Node, body: ChatCompletionRequest | CompletionRequest) -> None:
    """The request's size caps, on the parsed body and before anything tokenizes it."""
    if isinstance(body, ChatCompletionRequest):
        check_messages(list(body.messages), node.settings.limits)
    else:
        check_prompt(body.prompts(), node.settings.limits)


async def rate_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The tenant's requests per minute, before the body is parsed: a refusal (429) costs the
    node as little as it can, and the tenant is known from its key.

    Also puts the request's :class:`Routing` on its state (the error handler reads the route and
    the ``x-ratelimit-*`` headers from there).
    """
    routing = Routing()
    connection.state.routing = routing
    node: Node = connection.app.state.node
    if node.limiter is not None:
        routing.ratelimit.update(node.limiter.admit_request(connection.state.get("tenant", "default")))


Writer = ChunkWriter | ResponseWriter | NdjsonWriter
# The writer of the API a request came in on, made once the request is read.
MakeWriter = Callable[[ChatCompletionRequest | CompletionRequest, GenerationRequest], Writer]


def openai_writer(body: ChatCompletionRequest | CompletionRequest, gen: GenerationRequest) -> ChunkWriter:
    """The writer of /v1/chat/completions and /v1/completions."""
    call = body.tool_use() if isinstance(body, ChatCompletionRequest) else None
    kind: Kind = "chat" if isinstance(body, ChatCompletionRequest) else "text"
    return ChunkWriter(kind, gen.model, include_usage=body.include_usage, call=call, logprobs=gen.params.logprobs is not None)


async def respond(
    request: Request[Any, Any, State],
    body: ChatCompletionRequest | CompletionRequest,
    make_writer: MakeWriter = openai_writer,
    after: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> Response[Any]:
    """Route ``body`` and answer in the shape ``make_writer``'s writer writes (OpenAI's chat or
    text completion by default; the Responses API's, Ollama's); ``after`` gets the finished
    response object before the client does (a stored response can be continued as soon as it
    is seen)."""
    started = time.perf_counter()
    node: Node = request.app.state.node
    rid: str = request.state.request_id
    routing: Routing = request.state.routing  # made by rate_guard
    if isinstance(body, CompletionRequest):
        body = await text_prompts(node, body)
    _check_caps(node, body)
    ctx = request_context(request, body)
    gen = body.to_generation(rid, ctx.tenant)
    prompts = body.prompts() if isinstance(body, CompletionRequest) else []
    writer = make_writer(body, gen)
    ctx = dataclasses.replace(ctx, response_id=getattr(writer, "rid", None))  # what a rating names
    fan = choices.fan_out(gen, ctx, routing, body.n, prompts if len(prompts) > 1 else ())
    # What each choice's text starts with: its prompt, with ``echo``.
    echoes = [prompts[i // body.n] if isinstance(body, CompletionRequest) and body.echo else "" for i in range(len(fan))]
    if not body.stream:
        # Watched from the start: a member generates a whole answer before its one chunk comes.
        done = await _while_connected(request, choices.whole(node, fan))
        headers = routing.headers()  # after the last chunk: a fallback mid-way shows
        headers[REQUEST_ID_HEADER] = rid
        headers["x-edgeroute-latency-ms"] = f"{(time.perf_counter() - started) * 1000:.1f}"
        if isinstance(writer, ChunkWriter):
            usage = choices.total_usage([d.usage for d in done], body.n)
            answer = writer.whole_choices(
                [(e + d.text, d.finish_reason, d.logprobs, d.stop_word) for e, d in zip(echoes, done)], usage
            )
        else:  # one answer (n is 1 there)
            answer = writer.whole(done[0].text, done[0].finish_reason, done[0].usage, done[0].logprobs, done[0].stop_word)
            if after is not None:
                await after(answer)
        return Response(answer, headers=headers)

    routed = await choices.start(node, fan)
    drain: Drain | None = request.app.state.get("drain")
    n = len(routed)

    # A cache hit is in memory: its events go out in one write. One write per word cost the node
    # ~8 ms for a 256-token answer on an idle box, and a hit's latency under load was mostly that.
    whole = all(r.routing.cache_hit is not None for r in routed)

    async def events() -> AsyncIterator[bytes]:
        out = [writer.opening(n)] + [writer.text(e, (), i) for i, e in enumerate(echoes) if e]
        usages: dict[int, Usage] = {}  # by choice index, as each ends
        merged = choices.merge(routed)
        try:
            async for index, chunk in merged:
                ended = False
                if chunk.text:
                    out.append(writer.text(chunk.text, chunk.logprobs, index))
                if chunk.finish_reason is not None:
                    usages[index] = chunk.usage or Usage(0, 0)
                    ended = len(usages) == n
                    # Only the last finish sends the usage, by then of every choice in order.
                    usage = choices.total_usage([usages[i] for i in sorted(usages)], body.n if ended else 0)
                    out.append(writer.finish(chunk.finish_reason, usage, index, last=ended, stop_word=chunk.stop_word))
                elif drain is not None and drain.aborting:
                    # The drain deadline passed: end the stream cleanly rather than cut it.
                    out.append(writer.error("the node is shutting down", "server_error", "shutting_down"))
                    ended = True
                if ended and after is not None and isinstance(writer, ResponseWriter) and writer.final is not None:
                    await after(writer.final)  # before the last event: the client may continue it at once
                if ended or not whole:
                    yield b"".join(out)
                    out = []
                if ended:
                    return
        except Exception as exc:  # noqa: BLE001 - headers are sent; the stream must end cleanly
            out.append(writer.error(f"generation failed: {exc}"))
        finally:
            await merged.aclose()  # stops the engines when the stream ends early
        if out:
            yield b"".join(out)

    headers = {**routing.headers(), REQUEST_ID_HEADER: rid, "cache-control": "no-cache", "x-accel-buffering": "no"}
    return Stream(events(), media_type=writer.media_type, headers=headers)


async def _embeddings(request: Request[Any, Any, State], body: EmbeddingsBody) -> Response[Any]:
    """Each input embedded by the node's embedder, in the tenant's turn with the cache's lookups."""
    started = time.perf_counter()
    node: Node = request.app.state.node
    texts = body.texts()
    check_inputs(texts, node.settings.limits)
    embedder = node.embedding_model(body.model)
    if body.dimensions is not None and body.dimensions != embedder.dim:
        raise InvalidRequestError(
            f"dimensions must be {embedder.dim} for {body.model} (its embeddings cannot be shortened)",
            param="dimensions", code="invalid_value",
        )
    tenant = request.state.get("tenant", "default")
    vectors = await asyncio.gather(*(embedder.embed(text, tenant) for text in texts))
    tokens = sum(await asyncio.to_thread(embedder.count_tokens, texts))
    headers = {
        REQUEST_ID_HEADER: request.state.request_id,
        "x-edgeroute-latency-ms": f"{(time.perf_counter() - started) * 1000:.1f}",
    }
    return Response(embedding_list(vectors, body.model, tokens, body.encoding_format), headers=headers)


async def _while_connected(request: Request[Any, Any, State], answer: Coroutine[Any, Any, T]) -> T:
    """Route and collect a whole answer, but stop when the client goes away (as a stream does).

    The body was read before; the next message on the connection is ``http.disconnect``, which
    the server sends when the client closes it.
    """
    work = asyncio.ensure_future(answer)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        work.cancel()  # the handler itself is cancelled (the server stops): so is the generation
        raise
    finally:
        gone.cancel()
    if not work.done():
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        raise ClientGoneError("the client closed the connection before the answer was ready")
    return work.result()


async def _disconnected(request: Request[Any, Any, State]) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class OpenAIController(Controller):
    path = "/v1"
    tags = ["openai"]
    guards = [request_id_guard, api_key_guard]
    security = [{BEARER: []}]

    @post(
        "/chat/completions",
        guards=[rate_guard],
        summary="Create a chat completion",
        status_code=200,
        responses=openapi.answers(openapi.ChatCompletionBody, *openapi.COMPLETION_ERRORS),
        operation_class=openapi.StreamingOperation,
    )
    async def chat_completions(self, request: Request[Any, Any, State], data: ChatCompletionRequest) -> Response[Any]:
        return await respond(request, data)

    @post(
        "/completions",
        guards=[rate_guard],
        summary="Create a text completion",
        status_code=200,
        responses=openapi.answers(openapi.TextCompletionBody, *openapi.COMPLETION_ERRORS),
        operation_class=openapi.StreamingOperation,
    )
    async def completions(self, request: Request[Any, Any, State], data: CompletionRequest) -> Response[Any]:
        return await respond(request, data)

    @post(
        "/embeddings",
        guards=[rate_guard],
        summary="Create embeddings (the node's embedding model, all-minilm-l6-v2)",
        status_code=200,
        responses=openapi.answers(openapi.EmbeddingList, *openapi.COMPLETION_ERRORS),
    )
    async def embeddings(self, request: Request[Any, Any, State], data: EmbeddingsBody) -> Response[Any]:
        return await _embeddings(request, data)

    @get(
        "/models", summary="List the model ids a client may send (the embedding model's too)", responses=openapi.answers(openapi.ModelList, 401, 503)
    )
    async def models(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        node: Node = request.app.state.node
        return {"object": "list", "data": [_model_entry(m) for m in node.listed_models()]}

    # ``path``: a cloud model id may hold a slash ("org/model"), which the SDK sends unescaped.
    # Litestar documents a path parameter as format "uri"; a model id is a plain string.
    @get(
        "/models/{model_id:path}",
        summary="Retrieve one model id",
        responses=openapi.answers(openapi.ModelEntry, 401, 404, 503),
    )
    async def model(
        self, request: Request[Any, Any, State],
        model_id: Annotated[Path, Parameter(description="A model id", schema_extra={"format": None})],
    ) -> dict[str, Any]:
        node: Node = request.app.state.node
        wanted = str(model_id).lstrip("/")
        if wanted not in node.listed_models():
            raise node.unknown_model(wanted)
        return _model_entry(wanted)


def _model_entry(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "edgeroute"}


# Ollama's clients probe the root (its CLI's heartbeat is ``HEAD /``); a person who opens it
# learns where things are.
@get(
    "/",
    summary="A plain-text line saying the node runs and where its APIs are",
    tags=["ops"],
    media_type=MediaType.TEXT,
    responses={200: ResponseSpec(str, description="The line", generate_examples=False, media_type=MediaType.TEXT)},
)
async def root() -> str:
    return "edgeroute is running: OpenAI's API at /v1, Ollama's at /api, the dashboard at /dashboard\n"


@head("/", include_in_schema=False)
async def root_head() -> None:
    return None


# ``/health`` too: llama.cpp's server and vLLM answer there, and probes written for them ask it.
@get(
    ["/healthz", "/health"],
    summary="Liveness and the edge's load (503 while the node drains)",
    tags=["ops"],
    responses=openapi.answers(openapi.Health, 503),
)
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
