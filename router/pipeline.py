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

import numpy as np

from cloud import Started
from edge import CACHE_SKIPPED, CacheError, CacheHit, CacheKey, EmbedderError, Prepared, embedding_text
from models import Chunk, EngineError, GenerationRequest, Usage

from .errors import ClientGoneError, EdgeBusyError
from .fallback import describe, no_start_error, plan_for, prime, resume, start
from .limits import Reservation
from .logs import log_request
from .offload import off_loop, prompt_cost
from .node import Node
from .policy import Features, Hint, SpeedModels, decide
from .record import RequestRecord

log = logging.getLogger(__name__)


def prompt_text(req: GenerationRequest) -> str:
    """The prompt as the privacy rules and the telemetry preview read it."""
    if req.messages is None:
        return req.prompt or ""
    return "\n".join(m["content"] for m in req.messages if m["role"] in ("user", "system", "developer"))


async def run(node: Node, record: RequestRecord) -> RoutedStream:
    """Route and start ``record``'s request; failures before the first chunk raise here, before any byte."""
    gen, ctx = record.gen, record.ctx
    assert gen is not None  # set by router.choices.fan_out
    # 1. the hint and the privacy rules
    hint = _hint(node, gen.model)
    record.prompt = prompt_text(gen)
    cost = prompt_cost(gen)
    detect = functools.partial(node.privacy.detect, record.prompt, flag=ctx.private)
    private = record.private = await off_loop(cost, detect) is not None
    record.ts, record.started = time.time(), time.perf_counter()  # the request's clock
    record.hybrid = node.pool is not None
    wants_complexity = node.pool is not None and hint == "auto" and not private and node.policy.uses_complexity

    # 2. the cache
    key: CacheKey | None = None
    hit: CacheHit | None = None
    embedding: np.ndarray | None = None
    if node.cache is not None:
        key = CacheKey(ctx.tenant, gen.model, gen.messages, gen.prompt, gen.params, ctx.extra)
        record.cache = "off"
        if node.cache.cacheable(key, opt=ctx.cache):
            try:
                lookup = await node.cache.lookup(key, opt=ctx.cache, want_embedding=wants_complexity)
                hit, record.cache_refusal, embedding = lookup.hit, lookup.refusal, lookup.embedding
            except (CacheError, EmbedderError):
                log.exception("cache lookup failed; treated as a miss")
            record.cache = "skipped" if record.cache_refusal == CACHE_SKIPPED else "miss"
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
    features, state = _features(node, gen, hint, private, embedding, edge, record.started)
    record.features = features
    decision = record.decision = decide(node.policy, features)
    recorder = _Recorder(node, record, key, embedding, state)

    # 4. a cache hit, unless it is the edge's answer to a prompt now bound for the cloud
    if hit is not None and not (hit.tier == "edge" and decision.target == "cloud"):
        record.route, record.cache_hit = f"cache-{hit.kind}", hit
        if node.limiter is not None:  # nothing reserved: the tokens left as they stand
            record.ratelimit.update(node.limiter.token_headers(ctx.tenant))
        record.first_token()
        return RoutedStream(recorder, await prime(_replay(hit)))
    if hit is not None:
        record.cache_refusal = "edge-answer-for-cloud-prompt"

    # 5. the targets, started with fallback
    plan = record.plan = plan_for(edge, node.pool, decision, features, whole=not ctx.stream)
    try:
        if plan.targets[0] is edge and edge.too_long is not None:
            raise edge.too_long  # refused before anything is queued
        if node.limiter is not None:
            wanted = gen.params.max_tokens or node.settings.edge.default_max_tokens
            recorder.reservation = node.limiter.reserve_tokens(ctx.tenant, edge.prompt_tokens + wanted)
            if recorder.reservation is not None:
                record.ratelimit.update(recorder.reservation.headers)
        started = await start(plan, gen)
    except EngineError as exc:
        recorder.failed(exc)
        error = no_start_error(plan, exc)
        if isinstance(error, EdgeBusyError):
            record.refusal = "edge-saturated"  # the tenant is over its fair share of the edge's queue
        raise error from exc
    except Exception as exc:
        recorder.failed(exc)
        raise
    except asyncio.CancelledError:  # a non-streamed answer's client left (it is watched from the start)
        recorder.failed(ClientGoneError("the client closed the connection before the answer was ready"))
        raise
    record.first_token()
    record.route = "edge" if plan.attempts[-1].engine == "edge" else "cloud"

    # 6. the answer, stored before its last chunk goes out and recorded once the stream is closed
    return RoutedStream(recorder, started)


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
    depths = {m.name: m.depth() for m in healthy}
    state = _State(
        edge.prompt_tokens,
        SpeedModels.edge_state(edge.prompt_tokens, load.running, edge.wait_s, sum(depths.values())),
        load.running,
        depths,
        time.perf_counter(),
    )
    # The models learn decision -> first token; the request has already waited this long (the
    # body, the cache lookup, the tokenizing), which counts against the objective as it is.
    elapsed = state.decided_at - arrived
    edge_p = node.speed.edge.predict(state.edge, wanted)
    cloud_p = node.speed.cloud(edge.prompt_tokens, depths.items(), load.running, wanted) if healthy else None
    features = Features(
        prompt_tokens=edge.prompt_tokens,
        max_tokens=gen.params.max_tokens,
        complexity=None if embedding is None else node.classifier.score(embedding),
        edge_running=load.running,
        edge_waiting=load.waiting,
        edge_max_queue=node.settings.edge.max_queue,
        fits_edge_context=edge.prompt_tokens + wanted <= edge.n_ctx,
        cloud_healthy=len(healthy),
        cloud_outstanding=sum(depths.values()),
        cloud_ttft_ms=node.pool.ttft_ms_p50() if node.pool is not None else None,
        hint=hint,
        private=private,
        edge_capacity=load.capacity,
        edge_wait_ms=None if edge.wait_s is None else edge.wait_s * 1000.0,
        cloud_configured=node.pool is not None,
        edge_ttft_s=None if edge_p is None else elapsed + edge_p.first_s,
        cloud_ttft_s=None if cloud_p is None else elapsed + cloud_p.first_s,
        edge_done_s=None if edge_p is None else elapsed + edge_p.done_s,
        cloud_done_s=None if cloud_p is None else elapsed + cloud_p.done_s,
        edge_yields=node.edge_yields,
    )
    return features, state


@dataclass(frozen=True, slots=True)
class _State:
    """Each side's state as its first-token model reads it, at the decision (for learning from the answer)."""

    prompt_tokens: int
    edge: tuple[float, ...]
    edge_running: int
    depths: dict[str, int]  # healthy member -> requests in flight or queued on it
    decided_at: float  # perf_counter() when the state was read


async def _replay(hit: CacheHit) -> AsyncIterator[Chunk]:
    # A cached answer streams in word-sized pieces, like a generation would.
    for i, word in enumerate(hit.text.split(" ")):
        piece = word if i == 0 else " " + word
        if piece:
            yield Chunk(piece)
    yield Chunk("", hit.finish_reason, hit.usage, stop_word=hit.stop_word)


class _Recorder:
    """What ends the request once: the tokens settled with the tenant's rate, the answer stored
    in the cache, the first token's time learnt, the record sent to telemetry, the metrics and
    the request's log line."""

    def __init__(
        self, node: Node, record: RequestRecord, key: CacheKey | None, embedding: np.ndarray | None,
        state: _State,
    ) -> None:
        self.node, self.record, self._key, self._embedding, self._state = node, record, key, embedding, state
        self.reservation: Reservation | None = None  # tokens taken from the tenant's rate

    def settle(self, used: int) -> None:
        if self.node.limiter is not None and self.reservation is not None:
            self.node.limiter.settle(self.reservation, used)

    async def store(self, text: str, final: Chunk) -> None:
        """Store a finished answer made by an engine (never a replayed hit)."""
        record, cache = self.record, self.node.cache
        tier = record.plan.attempts[-1].engine if record.plan is not None and record.plan.attempts else None
        if self._key is None or tier not in ("edge", "cloud") or cache is None:
            return
        try:
            await cache.store(
                self._key, text, final.finish_reason or "stop", final.usage or Usage(0, 0), tier,
                embedding=self._embedding, opt=record.ctx.cache, stop_word=final.stop_word,
            )
        except Exception:  # noqa: BLE001 - a failed cache write must not fail the answer
            log.exception("cache store failed")

    def done(self, final: Chunk | None, error: str | None) -> None:
        record, ctx = self.record, self.record.ctx
        if final is not None:
            record.usage = final.usage or Usage(0, 0)
            self.settle(record.usage.total_tokens)
        if error is None and ctx.response_id is not None and self.node.cache is not None:
            self.node.cache.note_served(
                ctx.response_id, ctx.tenant, record.route, record.cache_hit, self._key, self._embedding
            )
        if error is None and not record.fallback:
            self._learn()
        self._emit(error)

    def _learn(self) -> None:
        """Teach the side that answered how long its first token and its answer took from the
        state it was in (streamed answers only: a whole answer's first chunk is its end)."""
        first, record = self.record.first_token_at, self.record
        if not record.ctx.stream or first is None or record.usage is None:
            return
        speed, state = self.node.speed, self._state
        times = (first - state.decided_at, time.perf_counter() - state.decided_at, record.usage.completion_tokens)
        if record.route == "edge":
            speed.edge.observe(state.edge, *times)
        elif record.route == "cloud" and (member := record.plan.member if record.plan else None) in state.depths:
            x = speed.member_state(state.prompt_tokens, state.depths[member], state.edge_running)
            speed.member(member).observe(x, *times)

    def failed(self, exc: BaseException) -> None:
        """Nothing started: the request is recorded as an error with the decision's reason."""
        self.settle(0)  # nothing was generated
        self._emit(str(exc)[:300])

    def _emit(self, error: str | None) -> None:
        event = self.record.event(error)
        self.node.telemetry.record(event)
        log_request(event)


# The client's or the privacy rules' choice of the edge: kept whatever the load.
_KEEPS_EDGE = frozenset({"private", "hint-edge"})


class _Yielded(EngineError):
    """The edge hands an answer it is decoding to the member that shares its cores."""


class RoutedStream:
    """A started answer: its engine's first chunk is made, so nothing can fail before a byte is sent.

    Iterated, it is the router's one layer of the stream (a break mid-way continued on the next
    target, the answer stored before its last chunk); closed, read or not, it records the decision
    once and stops the engine.
    """

    def __init__(self, recorder: _Recorder, started: Started) -> None:
        self.record = recorder.record
        self._recorder, self._started = recorder, started
        self._final: Chunk | None = None
        self._error: str | None = "client went away before the end"
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        record = self.record
        sent: list[str] = []  # the text chunks out so far (one token each)
        carried: int | None = None  # chunks sent before the latest break
        chunk: Chunk | None = self._started.first
        try:
            while chunk is not None:
                try:
                    if chunk.finish_reason is not None:
                        usage = chunk.usage or Usage(0, 0)
                        if carried is not None and record.features is not None:
                            # the original prompt; the chunks before and after the break
                            usage = Usage(record.features.prompt_tokens, carried + usage.completion_tokens)
                        self._final, self._error = replace(chunk, usage=usage), None
                        if record.cacheable:
                            await self._recorder.store("".join(sent) + chunk.text, self._final)
                        yield self._final
                        return
                    if chunk.text:
                        sent.append(chunk.text)
                        yield chunk
                        if self._yields():
                            raise _Yielded("the local member has work: the edge yields its cores")
                    chunk = await anext(self._started.rest, None)
                except EngineError as exc:
                    if record.plan is None or record.gen is None:
                        raise
                    await self._started.rest.aclose()  # type: ignore[attr-defined] - a member reads its body's end
                    carried = len(sent)
                    outcome = "yielded" if isinstance(exc, _Yielded) else "broken-mid-stream"
                    started = await resume(record.plan, record.gen, exc, sent, outcome)
                    if started is None:  # max_tokens is spent: the answer ends here
                        chunk = Chunk("", "length")
                    else:
                        self._started, chunk = started, started.first
        except Exception as exc:
            self._error = describe(exc)
            raise
        finally:
            await self.aclose()

    def _yields(self) -> bool:
        """Whether the edge's answer moves to the member now: where the local member shares the
        edge's cores and is the faster engine (``Node.edge_yields``), an edge answer the policy
        chose (not a hard rule's) leaves the cores as soon as the member has work, rather than
        slowing every answer the member makes until its own end."""
        plan, decision = self.record.plan, self.record.decision
        if (
            plan is None or decision is None or decision.reason in _KEEPS_EDGE
            or plan.attempts[-1].engine != "edge" or plan.index + 1 >= len(plan.targets)
        ):
            return False
        node = self._recorder.node
        return node.edge_yields and node.pool is not None and any(m.healthy and m.depth() > 0 for m in node.pool.members)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._recorder.done(self._final, self._error)
        finally:
            await self._started.rest.aclose()  # type: ignore[attr-defined] - the engine's own clean-up
