"""One request's record, from admission to telemetry: what was asked (:class:`RequestContext` and
the generation), the decision and its reason, how the cache took part, the attempts, the usage and
the timings. The rate guard makes it, :mod:`router.respond` says what was asked, the pipeline fills
in the rest; every ``x-edgeroute-*`` header of the response (an error's included) and the request's
:class:`~router.telemetry.DecisionEvent` are made from it, never from an exception or each other."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from edge import CacheHit
from models import GenerationRequest, Usage

from .fallback import StreamPlan
from .policy import Decision, Features
from .telemetry import DecisionEvent


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked, and the per-request switches that came with the request."""

    tenant: str = "default"
    cache: bool | None = None
    private: bool = False
    stream: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # answer-changing fields beyond SamplingParams
    response_id: str | None = None  # the id the client sees (a rating names it: POST /v1/feedback)


@dataclass(slots=True, eq=False)
class RequestRecord:
    """One request (one choice of it: :mod:`router.choices`) as it has gone so far."""

    gen: GenerationRequest | None = None  # what was asked: set once the body is read
    ctx: RequestContext = field(default_factory=RequestContext)
    ratelimit: dict[str, str] = field(default_factory=dict)  # OpenAI's x-ratelimit-* of the tenant
    prompt: str = ""  # the prompt as the privacy rules and the preview read it
    private: bool = False  # the client's flag or the privacy rules
    hybrid: bool = False  # the node has a cloud pool
    features: Features | None = None
    decision: Decision | None = None
    refusal: str | None = None  # why a refused request was refused, when it is not the decision's reason
    # How the cache took part when it did not answer: miss, skipped (temperature), off (opted out);
    # None: the node has no cache.
    cache: str | None = None
    cache_refusal: str | None = None  # why a near-duplicate (or an edge answer) was not served
    cache_hit: CacheHit | None = None  # the answer the cache served
    route: str = "error"  # where the answer started: edge, cloud, cache-exact, cache-semantic
    plan: StreamPlan | None = None  # the targets and the attempts on them
    usage: Usage | None = None  # the answer's, once it has ended
    ts: float = 0.0  # time.time() when the pipeline took the request
    started: float = 0.0  # perf_counter() then
    first_token_at: float | None = None

    def first_token(self) -> None:
        """Mark the first token (only the first call counts)."""
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    @property
    def cacheable(self) -> bool:
        """The cache was asked (whether or not it answered)."""
        return self.cache not in (None, "off")

    @property
    def complexity(self) -> float | None:
        return self.features.complexity if self.features is not None else None

    @property
    def fallback(self) -> str | None:
        return self.plan.path() if self.plan is not None else None

    def headers(self) -> dict[str, str]:
        """The ``x-edgeroute-*`` headers of the answer as it stands now (a break mid-way shows)."""
        headers = {**self.ratelimit, "x-edgeroute-route": self.route}
        hit = self.cache_hit
        if hit is not None:
            headers["x-edgeroute-reason"] = f"{hit.kind}-hit"
            headers["x-edgeroute-similarity"] = f"{hit.similarity:.4f}"
            headers["x-edgeroute-cache-tier"] = hit.tier
            if hit.probability is not None:  # semantic hits: the verifier's calibrated probability
                headers["x-edgeroute-verifier"] = f"{hit.probability:.4f}"
            return headers
        if self.cache is not None:
            headers["x-edgeroute-cache"] = self.cache
        if self.decision is not None:
            headers["x-edgeroute-reason"] = self.decision.reason
        if self.complexity is not None:
            headers["x-edgeroute-complexity"] = f"{self.complexity:.3f}"
        if self.fallback:
            headers["x-edgeroute-fallback"] = self.fallback
        if degraded := self.degraded():
            headers["x-edgeroute-degraded"] = degraded
        return headers

    def error_headers(self, reason: str) -> dict[str, str]:
        """An error is a route too: ``error``, the decision's reason (else ``reason``), the fallback path."""
        headers = {**self.ratelimit, "x-edgeroute-route": "error"}
        decided = self.decision.reason if self.decision is not None else reason.replace("_", "-")
        headers["x-edgeroute-reason"] = self.refusal or decided
        if self.fallback:
            headers["x-edgeroute-fallback"] = self.fallback
        return headers

    def degraded(self) -> str | None:
        """A cloud-bound prompt answered (in whole or in part) by the edge is a degraded answer."""
        decision = self.decision
        answered = self.plan.answered_by if self.plan is not None else None
        if not self.hybrid or decision is None or answered != "edge":
            return None
        if decision.target == "cloud" or decision.reason == "cloud-unhealthy":
            return "cloud-unavailable"
        return None

    def event(self, error: str | None) -> DecisionEvent:
        """The request as the ``decisions`` table stores it, ended now (``error``: how it failed)."""
        gen, usage, hit = self.gen, self.usage or Usage(0, 0), self.cache_hit
        assert gen is not None  # the pipeline records only a request it was given
        reason = f"{hit.kind}-hit" if hit is not None else self.decision.reason if self.decision else "error"
        ttft = None if self.first_token_at is None else (self.first_token_at - self.started) * 1000
        return DecisionEvent(
            ts=self.ts,
            request_id=gen.request_id,
            tenant=self.ctx.tenant,
            model=gen.model,
            route=self.route,
            reason=reason,
            fallback=self.fallback,
            degraded=self.degraded(),
            status="ok" if error is None else "error",
            error=error,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            latency_ms=(time.perf_counter() - self.started) * 1000,
            ttft_ms=ttft,
            similarity=None if hit is None else hit.similarity,
            complexity=self.complexity,
            member=self.plan.member if self.plan is not None else None,
            stream=self.ctx.stream,
            private=self.private,
            prompt_preview=self.prompt,
            features=self.features or {},
            cache=None if not self.cacheable else "hit" if hit is not None else "miss",
            cache_refusal=self.cache_refusal,
        )
