"""Answering one generation request, whatever API it came in on: the body is checked against the
caps, made a :class:`models.GenerationRequest`, routed (:mod:`router.choices`, once per choice;
:mod:`router.pipeline`), and written in the shape the API's writer writes (OpenAI's, the
Responses API's, Ollama's, llama.cpp's). The controllers (:mod:`router.api`,
:mod:`router.responses_api`, :mod:`router.ollama_api`, :mod:`router.llamacpp_api`) only read
their API's body and hand it here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import numpy as np
from litestar import Request, Response
from litestar.datastructures import State

from edge import Embedder
from models import GenerationRequest, Usage, Writer
from models.openai import ChunkWriter, ResponseWriter

from . import choices
from .admission import Drain
from .errors import ClientGoneError, InvalidRequestError
from .guards import REQUEST_ID_HEADER
from .limits import check_messages, check_texts
from .node import Node
from .offload import off_loop
from .record import RequestContext, RequestRecord
from .schemas import ChatCompletionRequest, CompletionRequest
from .streaming import EventStream, Last, disconnected

T = TypeVar("T")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Fields that never change the answer's text, so they stay out of the cache key.
_NOT_IN_KEY = {"cache", "private", "user", "stream", "stream_options", "n", "metadata", "store"}


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


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
        texts.append(await off_loop(len(tokens) * 4, functools.partial(node.edge.text_of_prompt, tokens)))
    single = isinstance(body.prompt, list) and isinstance(body.prompt[0], int)
    return body.model_copy(update={"prompt": texts[0] if single else texts})


# The writer of the API a request came in on, made once the request is read.
MakeWriter = Callable[[ChatCompletionRequest | CompletionRequest, GenerationRequest], Writer]


async def respond(
    request: Request[Any, Any, State],
    body: ChatCompletionRequest | CompletionRequest,
    make_writer: MakeWriter,
    after: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> Response[Any]:
    """Route ``body`` and answer in ``make_writer``'s shape; ``after`` gets the finished response
    object before the client does (a stored response can be continued as soon as it is seen)."""
    started = time.perf_counter()
    node: Node = request.app.state.node
    rid: str = request.state.request_id
    record: RequestRecord = request.state.record  # made by rate_guard
    # The size caps, on the parsed body and before anything tokenizes it.
    prompts: list[str] = []
    if isinstance(body, CompletionRequest):
        body = await text_prompts(node, body)
        prompts = body.prompts()
        check_texts(prompts, node.settings.limits, "prompt")
    else:
        check_messages(list(body.messages), node.settings.limits)
    tenant: str = request.state.get("tenant", "default")  # set by the API-key guard
    gen = record.gen = body.to_generation(rid, tenant)
    writer = make_writer(body, gen)
    # The per-request switches: the body's over the headers'.
    record.ctx = RequestContext(
        tenant=tenant,
        cache=body.cache if body.cache is not None else _flag(request.headers.get("x-edgeroute-cache")),
        private=bool(body.private) or bool(_flag(request.headers.get("x-edgeroute-private"))),
        stream=body.stream,
        # Fields the client sent that the schema does not know: they may change the answer.
        extra={k: v for k, v in (body.model_extra or {}).items() if k not in _NOT_IN_KEY},
        response_id=getattr(writer, "rid", None),  # what a rating names
    )
    fan = choices.fan_out(record, body.n, prompts if len(prompts) > 1 else ())
    # What each choice's text starts with: its prompt, with ``echo``.
    echoes = [prompts[i // body.n] if isinstance(body, CompletionRequest) and body.echo else "" for i in range(len(fan))]
    if not body.stream:
        # Watched from the start: a member generates a whole answer before its one chunk comes.
        done = await _while_connected(request, choices.whole(node, fan))
        headers = record.headers()  # after the last chunk: a fallback mid-way shows
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

    # A cache hit is in memory: its events go out in one write (one per word was most of a hit's
    # latency under load).
    whole = all(r.record.cache_hit is not None for r in routed)

    async def events() -> AsyncIterator[bytes]:
        out = [writer.opening(n)] + [writer.text(e, (), i) for i, e in enumerate(echoes) if e]
        usages: dict[int, Usage] = {}  # by choice index, as each ends
        # One choice is read straight from its stream (no layer between: issue 46); n are merged.
        chunks: AsyncIterator[Any] = aiter(routed[0]) if n == 1 else choices.merge(routed)
        try:
            async for item in chunks:
                index, chunk = (0, item) if n == 1 else item
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
                if ended:
                    # The body ends with it; what the stream does on its way out comes after.
                    yield Last(b"".join(out))
                    return
                if not whole:
                    yield b"".join(out)
                    out = []
        except Exception as exc:  # noqa: BLE001 - headers are sent; the stream must end cleanly
            out.append(writer.error(f"generation failed: {exc}"))
        finally:
            await chunks.aclose()  # type: ignore[attr-defined] - stops the engines when the stream ends early
        yield Last(b"".join(out))

    headers = {**record.headers(), REQUEST_ID_HEADER: rid, "cache-control": "no-cache", "x-accel-buffering": "no"}
    return EventStream(events(), media_type=writer.media_type, headers=headers)


async def embed_texts(
    request: Request[Any, Any, State], embedder: Embedder, texts: list[str], model: str,
    dimensions: int | None = None, truncate: bool = True,
) -> tuple[list[np.ndarray], int]:
    """Each text's vector (in the tenant's turn with the cache's lookups) and the tokens read.
    ``dimensions`` must be the embedder's own; without ``truncate`` a text over its context is refused.

    Stopped when the client goes away: its texts still queued leave the embedder's queue (2,048
    long inputs kept a core busy ~35 s for nobody).
    """
    if dimensions is not None and dimensions != embedder.dim:
        raise InvalidRequestError(
            f"dimensions must be {embedder.dim} for {model} (its embeddings cannot be shortened)",
            param="dimensions", code="invalid_value",
        )
    if not truncate:
        cut = await asyncio.to_thread(embedder.truncated, texts)
        if any(cut):
            raise InvalidRequestError(
                f"input {cut.index(True)} is longer than the embedding model's context "
                f"({embedder.max_tokens} tokens) and truncate is false", param="input", code="input_too_long",
            )
    tenant = request.state.get("tenant", "default")

    async def work() -> tuple[list[np.ndarray], int]:
        vectors = await asyncio.gather(*(embedder.embed(text, tenant) for text in texts))
        return list(vectors), sum(await asyncio.to_thread(embedder.count_tokens, texts))

    return await _while_connected(request, work())


async def _while_connected(request: Request[Any, Any, State], answer: Coroutine[Any, Any, T]) -> T:
    """Route and collect a whole answer, but stop when the client goes away (as a stream does)."""
    work = asyncio.ensure_future(answer)
    gone = asyncio.ensure_future(disconnected(request.receive))
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
