"""What one request carries down the router and what has been decided for it: the switches that
came with it (:class:`RequestContext`) and the record every ``x-edgeroute-*`` header is read
from (:class:`Routing`), made by the rate guard and filled in by the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edge import CacheHit

from .fallback import StreamPlan
from .policy import Decision


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked, and the per-request switches that came with the request."""

    tenant: str = "default"
    cache: bool | None = None
    private: bool = False
    stream: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # answer-changing fields beyond SamplingParams
    response_id: str | None = None  # the id the client sees (a rating names it: POST /v1/feedback)


@dataclass(slots=True)
class Routing:
    """What has been decided for one request so far.

    The API creates it and the pipeline fills it in; every ``x-edgeroute-*`` header of the
    response, an error's included, is read from here (never from the exception).
    """

    route: str = "error"  # where the answer started: edge, cloud, cache-exact, cache-semantic
    refusal: str | None = None  # why a refused request was refused, when it is not the decision's reason
    decision: Decision | None = None
    plan: StreamPlan | None = None
    cache_hit: CacheHit | None = None
    complexity: float | None = None
    hybrid: bool = False
    # How the cache took part when it did not answer: miss, skipped (temperature), off (opted out)
    cache: str | None = None
    ratelimit: dict[str, str] = field(default_factory=dict)  # OpenAI's x-ratelimit-* of the tenant

    def headers(self) -> dict[str, str]:
        """The ``x-edgeroute-*`` headers of the answer as it stands now (a break mid-way shows)."""
        hit = self.cache_hit
        if hit is not None:
            cached = {
                **self.ratelimit,
                "x-edgeroute-route": self.route,
                "x-edgeroute-reason": f"{hit.kind}-hit",
                "x-edgeroute-similarity": f"{hit.similarity:.4f}",
                "x-edgeroute-cache-tier": hit.tier,
            }
            if hit.probability is not None:  # semantic hits: the verifier's calibrated probability
                cached["x-edgeroute-verifier"] = f"{hit.probability:.4f}"
            return cached
        headers = {**self.ratelimit, "x-edgeroute-route": self.route}
        if self.cache is not None:
            headers["x-edgeroute-cache"] = self.cache
        if self.decision is not None:
            headers["x-edgeroute-reason"] = self.decision.reason
        if self.complexity is not None:
            headers["x-edgeroute-complexity"] = f"{self.complexity:.3f}"
        fallback = self.plan.path() if self.plan is not None else None
        if fallback:
            headers["x-edgeroute-fallback"] = fallback
        degraded = self.degraded()
        if degraded:
            headers["x-edgeroute-degraded"] = degraded
        return headers

    def error_headers(self, reason: str) -> dict[str, str]:
        """An error is a route too: ``error``, the decision's reason (else ``reason``), the fallback path."""
        headers = {**self.ratelimit, "x-edgeroute-route": "error"}
        if self.refusal is not None:
            headers["x-edgeroute-reason"] = self.refusal
        else:
            headers["x-edgeroute-reason"] = self.decision.reason if self.decision else reason.replace("_", "-")
        fallback = self.plan.path() if self.plan is not None else None
        if fallback:
            headers["x-edgeroute-fallback"] = fallback
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
