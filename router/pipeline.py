"""The path of one request, walked once and in order:

1. the model hint and the privacy rules;
2. the cache (exact, then semantic), which may also hand back the prompt's embedding;
3. the edge asked once (:meth:`edge.LlamaEngine.prepare`: the prompt's tokens, the context
   check, the tenant's wait), the features, and the decision: the policy's proposal under the
   hard rules;
4. a cache hit is served (unless it is an edge answer for a prompt now bound for the cloud);
5. otherwise the targets for the decision, started with fallback (:mod:`router.fallback`);
6. the answer streams out; before its last chunk it is stored in the cache, and once the stream
   is closed (a streamed answer's end is out by then: :mod:`router.streaming`) the decision is
   recorded (telemetry, metrics, the log line).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cloud import Started
from edge import CACHE_SKIPPED, CacheError, CacheHit, CacheKey, EmbedderError, Prepared, embedding_text
from models import Chunk, EngineError, GenerationRequest, Usage

from .errors import ClientGoneError, EdgeBusyError
from .fallback import no_start_error, plan_for, prime, resume, start
from .limits import Reservation
from .logs import log_request
from .offload import off_loop, prompt_cost
from .node import Node
from .policy import Features, Hint, SpeedModels, decide
from .routing import RequestContext, Routing
from .telemetry import Trace

log = logging.getLogger(__name__)


def prompt_text(req: GenerationRequest) -> str:
    """The prompt as the privacy rules and the telemetry preview read it."""
    if req.messages is None:
        return req.prompt or ""
    return "\n".join(m["content"] for m in req.messages if m["role"] in ("user", "system", "developer"))


async def run(node: Node, gen: GenerationRequest, ctx: RequestContext, routing: Routing) -> RoutedStream:
    """Route ``gen`` and start it; failures before the first chunk raise here, before any byte."""
    # 1. the hint and the privacy rules
    hint = _hint(node, gen.model)
    text = prompt_text(gen)
    cost = prompt_cost(gen)
    private = await off_loop(cost, functools.partial(node.privacy.detect, text, flag=ctx.private)) is not None
    trace = Trace(gen.request_id, ctx.tenant, gen.model, prompt=text, stream=ctx.stream, private=private)
    routing.hybrid = node.pool is not None
    wants_complexity = node.pool is not None and hint == "auto" and not private and node.policy.uses_complexity

    # 2. the cache
    key: CacheKey | None = None
    hit: CacheHit | None = None
    refusal: str | None = None
    embedding: np.ndarray | None = None
    cacheable = False
    if node.cache is not None:
        key = CacheKey(ctx.tenant, gen.model, gen.messages, gen.prompt, gen.params, ctx.extra)
        cacheable = node.cache.cacheable(key, opt=ctx.cache)
        if cacheable:
            try:
                lookup = await node.cache.lookup(key, opt=ctx.cache, want_embedding=wants_complexity)
                hit, refusal, embedding = lookup.hit, lookup.refusal, lookup.embedding
            except (CacheError, EmbedderError):
                log.exception("cache lookup failed; treated as a miss")
        routing.cache = "off" if not cacheable else "skipped" if refusal == CACHE_SKIPPED else "miss"
    # When an edge answer is on offer the complexity score must be known, or a complex prompt
    # would be served the edge's answer. An exact hit brings the embedding stored with it; only
    # an entry stored without one (a prompt too long for the semantic layer) costs a model run.
    if embedding is None and wants_complexity and node.embedder is not None and (hit is None or hit.tier == "edge"):
        words = embedding_text(gen.messages, gen.prompt, node.settings.cache.semantic_max_chars)
        embedding = await node.embedder.embed(words, ctx.tenant) if words else None

    # 3. the edge asked once, features and the decision
    if hit is not None and (node.pool is None or hit.tier != "edge"):
        # Served whatever the decision says: the count stored with the answer, no tokenizing
        # (it was the largest piece of the node's own work per hit under load).
        edge = node.edge.prepare(gen, hit.usage.prompt_tokens)
    else:
        # Tokenized once: the edge starts from these tokens if it answers.
        edge = await off_loop(cost, functools.partial(node.edge.prepare, gen))
    features, state = _features(node, gen, hint, private, embedding, edge, trace.started)
    decision = decide(node.policy, features)
    routing.decision = decision
    routing.complexity = features.complexity
    record = _Recorder(node, trace, routing, ctx, key, embedding, state, {
        "features": features,
        "complexity": features.complexity,
        "cache": None if not cacheable else ("hit" if hit else "miss"),
        "cache_refusal": refusal,
    })

    # 4. a cache hit, unless it is the edge's answer to a prompt now bound for the cloud
    if hit is not None and not (hit.tier == "edge" and decision.target == "cloud"):
        routing.route, routing.cache_hit = f"cache-{hit.kind}", hit
        if node.limiter is not None:  # nothing reserved: the tokens left as they stand
            routing.ratelimit.update(node.limiter.token_headers(ctx.tenant))
        record.common["similarity"] = hit.similarity
        trace.first_token()
        return RoutedStream(record, await prime(_replay(hit)))
    if hit is not None:
        record.common["cache"] = "miss"
        record.common["cache_refusal"] = "edge-answer-for-cloud-prompt"

    # 5. the targets, started with fallback
    plan = plan_for(edge, node.pool, decision, features, whole=not ctx.stream)
    routing.plan = plan
    try:
        if plan.targets[0] is edge and edge.too_long is not None:
            raise edge.too_long  # refused before anything is queued
        if node.limiter is not None:
            wanted = gen.params.max_tokens or node.settings.edge.default_max_tokens
            record.reservation = node.limiter.reserve_tokens(ctx.tenant, edge.prompt_tokens + wanted)
            if record.reservation is not None:
                routing.ratelimit.update(record.reservation.headers)
        started = await start(plan, gen)
    except EngineError as exc:
        record.failed(exc)
        error = no_start_error(plan, exc)
        if isinstance(error, EdgeBusyError):
            routing.refusal = "edge-saturated"  # the tenant is over its fair share of the edge's queue
        raise error from exc
    except Exception as exc:
        record.failed(exc)
        raise
    except asyncio.CancelledError:  # a non-streamed answer's client left (it is watched from the start)
        record.failed(ClientGoneError("the client closed the connection before the answer was ready"))
        raise
    trace.first_token()
    routing.route = "edge" if plan.attempts[-1].engine == "edge" else "cloud"

    # 6. the answer, stored before its last chunk goes out and recorded once the stream is closed
    store = _Store(key, embedding, ctx.cache) if cacheable and key is not None else None
    return RoutedStream(record, started, gen, features.prompt_tokens, store)


# -- the steps ---------------------------------------------------------------------------------


def _hint(node: Node, model: str) -> Hint:
    if model in ("auto", "edge", "cloud"):
        return model  # type: ignore[return-value]
    if model == node.edge_model:
        return "edge"
    if model in node.cloud_models():
        return "cloud"
    raise node.unknown_model(model)


def _features(
    node: Node, gen: GenerationRequest, hint: Hint, private: bool, embedding: np.ndarray | None, edge: Prepared,
    arrived: float,
) -> tuple[Features, _State]:
    load = edge.queue  # as this tenant sees it: the requests served before its own
    wanted = gen.params.max_tokens or node.settings.edge.default_max_tokens
    # The members themselves, not pool.status(): a status row per member per request is wasted work.
    healthy = [m for m in node.pool.members if m.healthy] if node.pool is not None else []
    state = _State(
        edge.prompt_tokens,
        SpeedModels.edge_state(edge.prompt_tokens, load.running, edge.wait_s),
        {m.name: m.depth() for m in healthy},
        time.perf_counter(),
    )
    # The models learn decision -> first token; the request has already waited this long (the
    # body, the cache lookup, the tokenizing), which counts against the objective as it is.
    elapsed = state.decided_at - arrived
    edge_s = node.speed.edge.predict(state.edge)
    cloud_s = node.speed.cloud(edge.prompt_tokens, state.depths.items()) if healthy else None
    features = Features(
        prompt_tokens=edge.prompt_tokens,
        max_tokens=gen.params.max_tokens,
        complexity=None if embedding is None else node.classifier.score(embedding),
        edge_running=load.running,
        edge_waiting=load.waiting,
        edge_max_queue=node.settings.edge.max_queue,
        fits_edge_context=edge.prompt_tokens + wanted <= edge.n_ctx,
        cloud_healthy=len(healthy),
        cloud_outstanding=sum(state.depths.values()),
        cloud_ttft_ms=node.pool.ttft_ms_p50() if node.pool is not None else None,
        hint=hint,
        private=private,
        edge_capacity=load.capacity,
        edge_wait_ms=None if edge.wait_s is None else edge.wait_s * 1000.0,
        cloud_configured=node.pool is not None,
        edge_ttft_s=None if edge_s is None else elapsed + edge_s,
        cloud_ttft_s=None if cloud_s is None else elapsed + cloud_s,
    )
    return features, state


@dataclass(frozen=True, slots=True)
class _State:
    """Each side's state as its first-token model reads it, at the decision (for learning from the answer)."""

    prompt_tokens: int
    edge: tuple[float, ...]
    depths: dict[str, int]  # healthy member -> requests in flight or queued on it
    decided_at: float  # perf_counter() when the state was read


def _replay(hit: CacheHit) -> AsyncIterator[Chunk]:
    async def gen() -> AsyncIterator[Chunk]:
        # A cached answer streams in word-sized pieces, like a generation would.
        for i, word in enumerate(hit.text.split(" ")):
            piece = word if i == 0 else " " + word
            if piece:
                yield Chunk(piece)
        yield Chunk("", hit.finish_reason, hit.usage, stop_word=hit.stop_word)

    return gen()


@dataclass(frozen=True, slots=True)
class _Store:
    """What storing the answer needs: its key, the prompt's embedding, the request's switch."""

    key: CacheKey
    embedding: np.ndarray | None
    opt: bool | None


class _Recorder:
    """Records the request's decision once: telemetry, metrics and the request's log line."""

    def __init__(
        self, node: Node, trace: Trace, routing: Routing, ctx: RequestContext, key: CacheKey | None,
        embedding: np.ndarray | None, state: _State, common: dict[str, Any],
    ) -> None:
        self.node, self._trace, self.routing, self.common = node, trace, routing, common
        self._ctx, self._key, self._embedding, self._state = ctx, key, embedding, state
        self.reservation: Reservation | None = None  # tokens taken from the tenant's rate

    def settle(self, used: int) -> None:
        if self.node.limiter is not None and self.reservation is not None:
            self.node.limiter.settle(self.reservation, used)

    def done(self, final: Chunk | None, error: str | None) -> None:
        routing = self.routing
        usage = final.usage if final is not None and final.usage else Usage(0, 0)
        if final is not None:
            self.settle(usage.prompt_tokens + usage.completion_tokens)
        if error is None and self._ctx.response_id is not None and self.node.cache is not None:
            self.node.cache.note_served(
                self._ctx.response_id, self._ctx.tenant, routing.route, routing.cache_hit, self._key, self._embedding
            )
        headers = routing.headers()
        reason = headers.get("x-edgeroute-reason", "")
        if error is None and "x-edgeroute-fallback" not in headers:
            self._learn(routing.route)
        self._emit(
            route=routing.route,
            reason=reason,
            degraded=routing.degraded(),
            fallback=headers.get("x-edgeroute-fallback"),
            status="ok" if error is None else "error",
            error=error,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            member=routing.plan.member if routing.plan is not None and routing.cache_hit is None else None,
        )

    def _learn(self, route: str) -> None:
        """Teach the side that answered how long its first token took from the state it was in
        (streamed answers only: a whole answer's first chunk is its end)."""
        first = self._trace.first_token_at
        if not self._ctx.stream or first is None:
            return
        speed, state = self.node.speed, self._state
        seconds = first - state.decided_at
        if route == "edge":
            speed.edge.observe(state.edge, seconds)
        elif route == "cloud" and (member := self.routing.plan.member if self.routing.plan else None) in state.depths:
            speed.member(member).observe(speed.member_state(state.prompt_tokens, state.depths[member]), seconds)

    def failed(self, exc: BaseException) -> None:
        """Nothing started: the request is recorded as an error with the decision's reason."""
        routing = self.routing
        fallback = routing.plan.path() if routing.plan is not None and isinstance(exc, EngineError) else None
        reason = routing.decision.reason if routing.decision is not None else "error"
        self.settle(0)  # nothing was generated
        self._emit(route="error", reason=reason, status="error", error=str(exc)[:300], fallback=fallback)

    def _emit(self, **fields: Any) -> None:
        event = self._trace.event(**fields, **self.common)
        self.node.telemetry.record(event)
        log_request(event)


class RoutedStream:
    """A started answer: its engine's first chunk is made, so nothing can fail before a byte is sent.

    Iterated, it is the router's one layer of the stream: the engine's chunks passed on, a
    stream that breaks mid-way continued on the next target (:func:`router.fallback.resume`),
    the answer stored in the cache before its last chunk goes out (a request right after it finds
    it). Closed (:meth:`aclose`, also at the iteration's end; read or not), it records the
    decision once and stops the engine: after the client has its end.
    """

    def __init__(
        self, record: _Recorder, started: Started, gen: GenerationRequest | None = None, prompt_tokens: int = 0,
        store: _Store | None = None,
    ) -> None:
        self.routing = record.routing
        self._record, self._started, self._gen = record, started, gen
        self._prompt_tokens, self._store = prompt_tokens, store
        self._final: Chunk | None = None
        self._error: str | None = "client went away before the end"
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        plan = self.routing.plan
        sent: list[str] = []  # the text chunks out so far (one token each)
        carried: int | None = None  # chunks sent before the latest break
        chunk: Chunk | None = self._started.first
        try:
            while chunk is not None:
                try:
                    if chunk.finish_reason is not None:
                        usage = chunk.usage or Usage(0, 0)
                        if carried is not None:  # the original prompt; the chunks before and after the break
                            usage = Usage(self._prompt_tokens, carried + usage.completion_tokens)
                        self._final, self._error = replace(chunk, usage=usage), None
                        if self._store is not None:
                            await self._stored("".join(sent) + chunk.text, self._final)
                        yield self._final
                        return
                    if chunk.text:
                        sent.append(chunk.text)
                        yield chunk
                    chunk = await anext(self._started.rest, None)
                except EngineError as exc:
                    if plan is None or self._gen is None:
                        raise
                    await self._started.rest.aclose()  # type: ignore[attr-defined] - a member reads its body's end
                    carried = len(sent)
                    started = await resume(plan, self._gen, exc, sent)
                    if started is None:  # max_tokens is spent: the answer ends here
                        chunk = Chunk("", "length")
                    else:
                        self._started, chunk = started, started.first
        except Exception as exc:
            self._error = f"{type(exc).__name__}: {exc}"[:300]
            raise
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._record.done(self._final, self._error)
        finally:
            await self._started.rest.aclose()  # type: ignore[attr-defined] - the engine's own clean-up

    async def _stored(self, text: str, final: Chunk) -> None:
        """Store a finished answer made by an engine (never a replayed hit)."""
        store, node, plan = self._store, self._record.node, self.routing.plan
        tier = plan.attempts[-1].engine if plan is not None and plan.attempts else None
        if store is None or tier not in ("edge", "cloud") or node.cache is None:
            return
        try:
            await node.cache.store(
                store.key, text, final.finish_reason or "stop", final.usage or Usage(0, 0), tier,
                embedding=store.embedding, opt=store.opt, stop_word=final.stop_word,
            )
        except Exception:  # noqa: BLE001 - a failed cache write must not fail the answer
            log.exception("cache store failed")
