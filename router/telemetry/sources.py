"""What telemetry reads from the rest of the node at scrape time, as small structural types.

Telemetry never imports the cloud pool; anything with these attributes will do (``cloud``'s
``MemberStatus`` and ``CloudPool`` are meant to fit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from models import EngineLoad


class MemberStatusLike(Protocol):
    """One cloud pool member as the pool reports it."""

    name: str
    base_url: str
    healthy: bool
    circuit: str  # "closed" | "open" | "half-open"
    outstanding: int
    running: int
    waiting: int
    latency_ms_p50: float | None
    ttft_ms_p50: float | None
    failures: int


class PoolView(Protocol):
    """The cloud pool's live status, one entry per member."""

    def status(self) -> Sequence[MemberStatusLike]: ...


@runtime_checkable
class EdgeLoadView(Protocol):
    """The edge engine's queue."""

    def load(self) -> EngineLoad: ...


@runtime_checkable
class BudgetView(Protocol):
    """The semantic cache's error budget per tenant with ratings: threshold, estimate, bound, counts."""

    def budget_gauges(self) -> Mapping[str, Mapping[str, float | None]]: ...

    @property
    def max_wrong_rate(self) -> float: ...


CIRCUIT_STATES = ("closed", "half-open", "open")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Who the node is, for ``edgeroute_node_info`` (a fleet tells its nodes apart by it)."""

    name: str
    edge_model: str = ""
    edge_model_version: str = ""  # the GGUF's sha256, first 12 hex digits
    version: str = ""  # edgeroute's own version
    dashboard_path: str = ""  # "" when the node serves no dashboard
    draining: bool = False
