"""The routing policies (length, complexity, hybrid) and the registry that builds one from settings.

A policy only scores a request and proposes a target; the hard rules (privacy, hints, context
fit, cloud health) are applied around it, once, by :func:`router.policy.rules.decide`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigError
from .config import RoutingSettings
from .features import Decision, Features, Policy


@dataclass(frozen=True, slots=True)
class LengthPolicy:
    """Long prompts or long requested outputs go to the cloud; the rest stays on the edge
    (a score above 1 is "too long for the edge")."""

    long_prompt_tokens: int = 512
    long_max_tokens: int = 512
    name: str = "length"
    uses_complexity: bool = False

    def score(self, f: Features) -> float:
        return max(f.prompt_tokens / self.long_prompt_tokens, (f.max_tokens or 0) / self.long_max_tokens)

    def length_rule(self, f: Features, score: float) -> Decision:
        if f.prompt_tokens > self.long_prompt_tokens:
            return Decision("cloud", "long-prompt", score)
        if f.max_tokens is not None and f.max_tokens > self.long_max_tokens:
            return Decision("cloud", "long-output", score)
        return Decision("edge", "short-prompt", score)

    def decide(self, f: Features) -> Decision:
        return self.length_rule(f, self.score(f))


@dataclass(frozen=True, slots=True)
class ComplexityPolicy:
    """Complexity at or above the threshold goes to the cloud (RouteLLM-style).

    Without a complexity score (no embedding was computed) it falls back to the length rule.
    """

    threshold: float = 0.5
    length: LengthPolicy = LengthPolicy()
    name: str = "complexity"
    uses_complexity: bool = True

    def decide(self, f: Features) -> Decision:
        if f.complexity is None:
            return self.length.length_rule(f, self.length.score(f))
        score = f.complexity
        if score >= self.threshold:
            return Decision("cloud", "complex", score)
        return Decision("edge", "simple", score)


@dataclass(frozen=True, slots=True)
class HybridPolicy:
    """Length and complexity, weighed against the live state of both sides.

    After the length rule, a saturated edge (``edge_waiting`` at the bound) sends the request to
    the cloud, and so does an edge whose estimated wait for a free slot is over
    ``edge_wait_budget_ms`` (``edge-wait-over-budget``). Otherwise the complexity threshold moves
    with load: a busy edge lowers it by up to ``edge_pressure`` and a busy or slow cloud raises it
    by up to ``cloud_pressure``. Reasons say which force decided: ``complex``/``simple`` when the
    unadjusted threshold agrees, ``edge-busy``/``cloud-busy`` when only the load tipped it.
    Last, :meth:`by_speed` holds the proposal to the first-token objective.
    """

    threshold: float = 0.5
    length: LengthPolicy = LengthPolicy()
    edge_queue_bound: int = 4
    edge_wait_budget_ms: float = 2000.0
    edge_pressure: float = 0.15
    cloud_pressure: float = 0.15
    cloud_member_capacity: int = 8
    cloud_ttft_budget_ms: float = 1500.0
    ttft_slo_s: float = 1.0
    name: str = "hybrid"
    uses_complexity: bool = True

    def saturation_bound(self, f: Features) -> int:
        """Requests waiting on the edge at which it counts as saturated (the engine itself refuses
        beyond ``EdgeSettings.max_queue``, which the request path falls back from)."""
        return max(1, min(self.edge_queue_bound, f.edge_max_queue))

    def edge_load(self, f: Features) -> float:
        """0 (idle) to 1 (every slot busy and the queue at the saturation bound)."""
        bound = self.saturation_bound(f)
        return min(1.0, (f.edge_running + f.edge_waiting) / (bound + max(1, f.edge_capacity)))

    def cloud_load(self, f: Features) -> float:
        """0 (idle, fast) to 1 (every member at capacity, or TTFT at twice the budget)."""
        if f.cloud_healthy <= 0:
            return 1.0
        busy = f.cloud_outstanding / (f.cloud_healthy * self.cloud_member_capacity)
        slow = 0.0
        if f.cloud_ttft_ms is not None:
            slow = (f.cloud_ttft_ms - self.cloud_ttft_budget_ms) / self.cloud_ttft_budget_ms
        return min(1.0, max(0.0, busy, slow))

    def effective_threshold(self, f: Features) -> float:
        return (
            self.threshold - self.edge_pressure * self.edge_load(f) + self.cloud_pressure * self.cloud_load(f)
        )

    def decide(self, f: Features) -> Decision:
        return self.by_speed(f, self.propose(f))

    def by_speed(self, f: Features, proposed: Decision) -> Decision:
        """The proposal, unless its side is predicted to miss the first-token objective while the
        other side will meet it, or will at least answer sooner (reason ``edge-slow`` or
        ``cloud-slow``: the side that was passed over). A side with no prediction counts as fast.

        Under load (anything in flight on either side), an edge proposal goes to a cloud predicted
        to meet the objective and to end the answer sooner (``edge-later``): an easy prompt is
        answered well on either side, and on a busy node the sooner end frees its client and the
        cores for the next request. A cloud proposal is the quality preference and stays.

        Where the edge yields (``edge_yields``: a local member computing natively on the edge's own
        cores), under load every edge proposal goes to the cloud (``edge-yields``) and nothing
        moves to the edge."""
        if proposed.reason == "edge-saturated":
            return proposed  # the edge would refuse it: no prediction of the queue's speed applies
        edge_first = proposed.target == "edge"
        busy = f.edge_running + f.edge_waiting + f.cloud_outstanding > 0
        if f.edge_yields and busy:
            # Both engines on the same cores stall each other (each one's threads wait for the
            # others at every step): under load the faster member keeps them all.
            return Decision("cloud", "edge-yields", proposed.score) if edge_first else proposed
        mine, other = (f.edge_ttft_s, f.cloud_ttft_s) if edge_first else (f.cloud_ttft_s, f.edge_ttft_s)
        if mine is not None and mine > self.ttft_slo_s and other is not None and (
            other <= self.ttft_slo_s or other < mine
        ):
            return Decision("cloud" if edge_first else "edge", f"{proposed.target}-slow", proposed.score)
        if edge_first and busy and f.cloud_ttft_s is not None and f.cloud_ttft_s <= self.ttft_slo_s and (
            f.edge_done_s is not None and f.cloud_done_s is not None and f.cloud_done_s < f.edge_done_s
        ):
            return Decision("cloud", "edge-later", proposed.score)
        return proposed

    def propose(self, f: Features) -> Decision:
        """Length, saturation, then complexity against a threshold moved by both sides' load."""
        score = f.complexity if f.complexity is not None else self.length.score(f)
        by_length = self.length.length_rule(f, score)
        if by_length.reason != "short-prompt":
            return by_length
        if f.edge_waiting >= self.saturation_bound(f):
            return Decision("cloud", "edge-saturated", score)
        if f.edge_wait_ms is not None and f.edge_wait_ms > self.edge_wait_budget_ms:
            return Decision("cloud", "edge-wait-over-budget", score)
        if f.complexity is None:
            return by_length
        if score >= self.effective_threshold(f):
            return Decision("cloud", "complex" if score >= self.threshold else "edge-busy", score)
        return Decision("edge", "simple" if score < self.threshold else "cloud-busy", score)


def _length(s: RoutingSettings) -> LengthPolicy:
    return LengthPolicy(long_prompt_tokens=s.length.long_prompt_tokens, long_max_tokens=s.length.long_max_tokens)


def _complexity(s: RoutingSettings) -> ComplexityPolicy:
    return ComplexityPolicy(threshold=s.complexity.threshold, length=_length(s))


def _hybrid(s: RoutingSettings) -> HybridPolicy:
    return HybridPolicy(
        threshold=s.complexity.threshold, length=_length(s), ttft_slo_s=s.ttft_slo_s, **s.hybrid.model_dump()
    )


POLICIES: dict[str, Callable[[RoutingSettings], Policy]] = {
    "length": _length,
    "complexity": _complexity,
    "hybrid": _hybrid,
}


def build_policy(settings: RoutingSettings) -> Policy:
    """The configured policy; an unknown name raises :class:`ConfigError` listing the valid ones."""
    factory = POLICIES.get(settings.policy.strip().lower())
    if factory is None:
        valid = ", ".join(sorted(POLICIES))
        raise ConfigError(
            f"unknown routing policy {settings.policy!r}; valid policies: {valid}",
            param="routing.policy",
            code="invalid_policy",
        )
    return factory(settings)
