"""What the pool reports: one event per outcome (for telemetry) and a status row per member."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EventKind = Literal[
    "started",  # first token (or an empty finished answer) arrived from ``member``
    "success",  # the stream finished cleanly
    "failure",  # an attempt failed before its first token
    "stream_broken",  # the stream broke after its first token
    "retry",  # another attempt follows a failure
    "hedge",  # a second attempt was sent because the first was slow
    "rejected",  # the member refused the request itself (4xx): not retried
    "unavailable",  # no member could serve the request
    "ejected",  # the member's circuit opened
    "half_open",  # the member's cooldown ended and it may take one probe
    "readmitted",  # the member's circuit closed again
]


@dataclass(frozen=True, slots=True)
class PoolEvent:
    kind: EventKind
    member: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class MemberStatus:
    name: str
    base_url: str
    healthy: bool
    circuit: str  # closed | open | half-open
    outstanding: int  # this node's requests in flight on the member
    running: int  # the member's own numbers when it publishes vLLM metrics, else this node's view
    waiting: int
    latency_ms_p50: float | None
    ttft_ms_p50: float | None
    failures: int  # consecutive
    last_error: str | None
    kv_cache_usage: float | None = None  # 0 to 1, from the member's vLLM metrics when it publishes them
