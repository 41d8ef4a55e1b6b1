"""What a routing policy sees (Features) and what it answers (Decision)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Target = Literal["edge", "cloud"]
Hint = Literal["auto", "edge", "cloud"]


@dataclass(frozen=True, slots=True)
class Features:
    """Everything known about a request and the node's state when it is routed."""

    prompt_tokens: int
    max_tokens: int | None  # as requested (None = default)
    complexity: float | None  # P(needs cloud) from the classifier on the prompt embedding
    edge_running: int
    edge_waiting: int
    edge_max_queue: int
    fits_edge_context: bool  # prompt + max_tokens fit the edge model's n_ctx
    cloud_healthy: int  # healthy members (0 = cloud unreachable)
    cloud_outstanding: int  # requests in flight + queued across healthy members
    cloud_ttft_ms: float | None  # recent p50 TTFT of the pool
    hint: Hint
    private: bool
    # Defaults keep decisions logged before the edge had slots replayable.
    edge_capacity: int = 1  # requests the edge decodes at once (its slots)
    edge_wait_ms: float | None = None  # the edge's estimate of a new request's wait for a slot
    cloud_configured: bool = True  # False on an edge-only node (no pool): no cloud to be unhealthy
    # Predicted seconds to the first token and to the answer's end (of max_tokens, or the default)
    # on each side (router.policy.speed); None: not known yet.
    edge_ttft_s: float | None = None
    cloud_ttft_s: float | None = None
    edge_done_s: float | None = None
    cloud_done_s: float | None = None
    # The local member runs on the edge's cores and is the faster engine: the edge yields under load.
    edge_yields: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """Where a request runs, a short machine-readable reason, and the policy's score."""

    target: Target
    reason: str
    score: float  # higher = more cloud-worthy


class Policy(Protocol):
    """A routing policy: one pure function from features to a decision."""

    name: str
    uses_complexity: bool  # False: the request path may skip the prompt embedding

    def decide(self, f: Features) -> Decision: ...


_FIELDS = tuple(f.name for f in dataclasses.fields(Features))
_REQUIRED = tuple(
    f.name for f in dataclasses.fields(Features) if f.default is dataclasses.MISSING
)


def features_from_dict(data: Mapping[str, Any]) -> Features:
    """Rebuild logged features; unknown keys are ignored, a missing one raises ``ValueError``."""
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise ValueError(f"logged features lack {', '.join(missing)}")
    values = {name: data[name] for name in _FIELDS if name in data}
    if values["hint"] not in ("auto", "edge", "cloud"):
        raise ValueError(f"logged features have an invalid hint {values['hint']!r}")
    return Features(**values)
