"""The path of one request: cache, features, policy, generation with fallback, store, telemetry."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cloud import CloudError
from edge import EdgeSaturatedError, EngineClosedError, GenerationError
from models import Chunk, EdgerouteError, Engine, GenerationRequest, Usage

from .errors import NoCapacityError
from .fallback import StreamPlan, resilient, start
from .policy import Decision, Features
from .telemetry import Trace

if TYPE_CHECKING:
    from edge import CacheHit, CacheKey

    from .node import Node, RequestContext

log = logging.getLogger(__name__)

# Failures before the first token that another target can absorb.
RETRYABLE: tuple[type[BaseException], ...] = (CloudError, EdgeSaturatedError, EngineClosedError, GenerationError)
# Failures after the first token: the stream continues elsewhere from the text so far.
BROKEN: tuple[type[BaseException], ...] = (CloudError, GenerationError)


@dataclass
class RoutedStream:
    """A started answer: where it runs, why, its headers, and its chunks (the first already made)."""

    route: str
    reason: str
    first: Chunk
    rest: AsyncIterator[Chunk]
    headers: dict[str, str] = field(default_factory=dict)
    # Fallback and degradation as they stand now: a non-streamed answer reports them after the
    # last chunk, so a break mid-generation shows in its headers too.
    outcome: Callable[[], dict[str, str]] | None = None

    async def chunks(self) -> AsyncIterator[Chunk]:
        yield self.first
        async for chunk in self.rest:
            yield chunk

    def response_headers(self) -> dict[str, str]:
        """The ``x-edgeroute-*`` headers of the answer so far."""
        headers = {"x-edgeroute-route": self.route, "x-edgeroute-reason": self.reason, **self.headers}
        if self.outcome is not None:
            headers.update(self.outcome())
        return headers


def prompt_text(req: GenerationRequest) -> str:
    if req.messages is None:
        return req.prompt or ""
    return "\n".join(m["content"] for m in req.messages if m["role"] in ("user", "system", "developer"))


def _last_user(req: GenerationRequest) -> str:
    """The text the cache and the complexity classifier embed: the last user turn."""
    if req.messages is None:
        return req.prompt or ""
    users = [m["content"] for m in req.messages if m["role"] == "user"]
    return users[-1] if users else prompt_text(req)


def _replay_hit(hit: CacheHit) -> AsyncIterator[Chunk]:
    async def gen() -> AsyncIterator[Chunk]:
        # A cached answer streams in word-sized pieces, like a generation would.
        words = hit.text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            if piece:
                yield Chunk(piece)
        yield Chunk("", hit.finish_reason, hit.usage)

    return gen()


async def route(node: Node, gen: GenerationRequest, ctx: RequestContext, stream: bool) -> RoutedStream:
    """Decide where ``gen`` runs and start it; errors before the first token raise here."""
    hint = node.hint_for(gen.model)
    text = prompt_text(gen)
    private_rule = node.privacy.detect(text, flag=ctx.private)
    private = private_rule is not None
    trace = Trace(gen.request_id, ctx.tenant, gen.model, prompt=text, stream=stream, private=private)

    key: CacheKey | None = None
    hit: CacheHit | None = None
    refusal: str | None = None
    embedding = None
    cacheable = node.cache is not None
    routing_embedding = node.needs_complexity(hint, private)
    if node.cache is not None:
        from edge import CacheError, CacheKey, EmbedderError

        key = CacheKey(ctx.tenant, gen.model, gen.messages, gen.prompt, gen.params, ctx.extra)
        cacheable = node.cache.cacheable(key, opt=ctx.cache)
        if cacheable:
            try:
                lookup = await node.cache.lookup(key, opt=ctx.cache, want_embedding=routing_embedding)
                hit, refusal, embedding = lookup.hit, lookup.refusal, lookup.embedding
            except (CacheError, EmbedderError):
                log.exception("cache lookup failed; treated as a miss")
    # When an edge answer is on offer the complexity score must be known, or a complex prompt
    # would be served the edge's answer. An exact hit brings the embedding stored with it; only
    # an entry stored without one (a prompt too long for the semantic layer) costs a model run.
    if embedding is None and routing_embedding and node.embedder is not None and (hit is None or hit.tier == "edge"):
        embedding = await node.embedder.embed(_last_user(gen))

    features = node.features(gen, hint, private, embedding)
    decision = node.policy.decide(features)
    common: dict[str, Any] = {
        "features": features,
        "complexity": features.complexity,
        "cache": None if not cacheable else ("hit" if hit else "miss"),
        "cache_refusal": refusal,
    }

    if hit is not None and not (hit.tier == "edge" and decision.target == "cloud"):
        route_name = f"cache-{hit.kind}"
        trace.first_token()
        headers = {"x-edgeroute-similarity": f"{hit.similarity:.4f}", "x-edgeroute-cache-tier": hit.tier}
        if hit.probability is not None:  # semantic hits: the verifier's calibrated probability
            headers["x-edgeroute-verifier"] = f"{hit.probability:.4f}"
        rest = _finish(node, trace, _replay_hit(hit), route_name, f"{hit.kind}-hit", None, None,
                       {**common, "similarity": hit.similarity}, key=None)
        first = await anext(rest)
        return RoutedStream(route_name, f"{hit.kind}-hit", first, rest, headers)
    if hit is not None:
        common["cache"] = "miss"
        common["cache_refusal"] = "edge-answer-for-cloud-prompt"

    plan = StreamPlan([])
    plan.targets = node.targets(decision, features, plan)

    outcome = _Outcome(node, decision, plan, gen.request_id)
    try:
        index, first, rest = await start(plan, gen, RETRYABLE)
    except RETRYABLE as exc:
        fallback = node.fallback_path(plan, gen.request_id)
        node.telemetry.record(trace.event(route="error", reason=decision.reason, status="error",
                                          error=str(exc)[:300], fallback=fallback, **common))
        err = NoCapacityError(
            f"neither the edge nor the cloud can take this request now ({exc})", retry_after=2
        )
        err.headers = {"x-edgeroute-route": "error", "x-edgeroute-reason": decision.reason}
        if fallback:
            err.headers["x-edgeroute-fallback"] = fallback
        raise err from exc
    except EdgerouteError as exc:
        node.telemetry.record(trace.event(route="error", reason=decision.reason, status="error",
                                          error=str(exc)[:300], **common))
        exc.headers = {"x-edgeroute-route": "error", "x-edgeroute-reason": decision.reason}
        raise
    except Exception as exc:
        node.telemetry.record(trace.event(route="error", reason=decision.reason, status="error",
                                          error=str(exc)[:300], **common))
        raise
    trace.first_token()
    engine_name = plan.targets[index].name
    route_name = "edge" if engine_name == "edge" else "cloud"
    headers: dict[str, str] = {}
    if features.complexity is not None:
        headers["x-edgeroute-complexity"] = f"{features.complexity:.3f}"
    chunks = resilient(plan, gen, index, first, rest, BROKEN, RETRYABLE, features.prompt_tokens)
    out = _finish(node, trace, chunks, route_name, decision.reason, outcome, plan, common,
                  key=key if cacheable else None, embedding=embedding, opt=ctx.cache)
    first_out = await anext(out)
    return RoutedStream(route_name, decision.reason, first_out, out, headers, outcome)


class _Outcome:
    """``x-edgeroute-fallback`` and ``x-edgeroute-degraded`` for the attempts made so far.

    ``freeze`` fixes them when the decision is recorded: the node forgets the request's pool
    events then, and the non-streamed response asks after that.
    """

    def __init__(self, node: Node, decision: Decision, plan: StreamPlan, request_id: str) -> None:
        self._node, self._decision, self._plan, self._rid = node, decision, plan, request_id
        self._frozen: dict[str, str] | None = None

    def __call__(self) -> dict[str, str]:
        if self._frozen is not None:
            return self._frozen
        headers: dict[str, str] = {}
        fallback = self._node.fallback_path(self._plan, self._rid)
        if fallback:
            headers["x-edgeroute-fallback"] = fallback
        answered = next((a.engine for a in reversed(self._plan.attempts) if a.outcome == "ok"), None)
        degraded = _degraded(self._decision, answered) if self._node.pool is not None and answered else None
        if degraded:
            headers["x-edgeroute-degraded"] = degraded
        return headers

    def freeze(self) -> dict[str, str]:
        self._frozen = self()
        return self._frozen


def _degraded(decision: Decision, engine: str) -> str | None:
    """A cloud-bound prompt answered (in whole or in part) by the edge is a degraded answer."""
    if engine == "edge" and (decision.target == "cloud" or decision.reason == "cloud-unhealthy"):
        return "cloud-unavailable"
    return None


async def _finish(
    node: Node,
    trace: Trace,
    chunks: AsyncIterator[Chunk],
    route_name: str,
    reason: str,
    outcome: _Outcome | None,
    plan: StreamPlan | None,
    common: dict[str, Any],
    *,
    key: CacheKey | None,
    embedding: Any = None,
    opt: bool | None = None,
) -> AsyncIterator[Chunk]:
    """Pass chunks through; before the last one goes out, store the answer and record the decision.

    Recording happens before the final chunk is yielded because a consumer stops reading there.
    """
    parts: list[str] = []
    recorded = False

    def record(final: Chunk | None, error: str | None) -> None:
        usage = final.usage if final is not None and final.usage else Usage(0, 0)
        now = outcome.freeze() if outcome is not None else {}
        node.telemetry.record(
            trace.event(
                route=route_name,
                reason=reason,
                degraded=now.get("x-edgeroute-degraded"),
                fallback=now.get("x-edgeroute-fallback"),
                status="ok" if error is None else "error",
                error=error,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                member=node.member_of(trace.request_id, plan),
                **common,
            )
        )

    try:
        async for chunk in chunks:
            if chunk.finish_reason is None:
                parts.append(chunk.text)
                yield chunk
                continue
            parts.append(chunk.text)
            record(chunk, None)
            recorded = True
            tier = plan.attempts[-1].engine if plan and plan.attempts else None
            if key is not None and tier in ("edge", "cloud"):
                try:
                    usage = chunk.usage or Usage(0, 0)
                    await node.cache.store(  # type: ignore[union-attr]
                        key, "".join(parts), chunk.finish_reason, usage, tier, embedding=embedding, opt=opt
                    )
                except Exception:  # noqa: BLE001 - a failed cache write must not fail the answer
                    log.exception("cache store failed")
            yield chunk
            return
    except Exception as exc:
        if not recorded:
            recorded = True
            record(None, f"{type(exc).__name__}: {exc}"[:300])
        raise
    finally:
        if not recorded:
            record(None, "client went away before the end")


def choose_targets(edge: Engine, pool: Engine | None, decision: Decision, features: Features) -> list[Engine]:
    """The ordered engines for a decision; a private request never gets a cloud target."""
    if pool is None or features.private:
        return [edge]
    # After a broken stream a second pool attempt continues on another member, when there is one.
    cloud = [pool, pool] if features.cloud_healthy >= 2 else [pool]
    if decision.target == "cloud":
        return [*cloud, edge] if features.fits_edge_context else cloud
    return [edge, *cloud]
