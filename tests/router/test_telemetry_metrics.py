"""Prometheus metrics: counters from decisions, live gauges, a private registry."""

from __future__ import annotations

import time
from dataclasses import dataclass

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from models import EngineLoad
from router.telemetry import DecisionEvent
from router.telemetry.metrics import Metrics


def make(route: str, **fields: object) -> DecisionEvent:
    base: dict[str, object] = dict(
        ts=time.time(), request_id="r", tenant="t", model="auto", route=route, reason="why"
    )
    base.update(fields)
    return DecisionEvent(**base)  # type: ignore[arg-type]


@dataclass
class Member:
    name: str
    base_url: str = "http://m/v1"
    healthy: bool = True
    circuit: str = "closed"
    outstanding: int = 2
    running: int = 1
    waiting: int = 1
    latency_ms_p50: float | None = 250.0
    ttft_ms_p50: float | None = None
    failures: int = 0


class Pool:
    def __init__(self, members: list[Member]) -> None:
        self.members = members

    def status(self) -> list[Member]:
        return self.members


class Edge:
    def load(self) -> EngineLoad:
        return EngineLoad(running=1, waiting=4, capacity=32)


@dataclass
class EdgeStats:
    prefix_reused_tokens: int


class CountingEdge:
    def load(self) -> EngineLoad:
        return EngineLoad(running=8, waiting=0, capacity=8)

    def stats(self) -> EdgeStats:
        return EdgeStats(prefix_reused_tokens=123)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_decisions_feed_counters_and_histograms() -> None:
    m = Metrics()
    m.observe(
        make(
            "edge",
            reason="short",
            latency_ms=120.0,
            ttft_ms=20.0,
            prompt_tokens=5,
            completion_tokens=7,
            cache="miss",
        )
    )
    m.observe(make("cache-exact", reason="exact", latency_ms=2.0, ttft_ms=1.0, completion_tokens=7))
    m.observe(
        make(
            "cloud",
            reason="complex",
            fallback="member-a->member-b",
            latency_ms=900.0,
            cache="miss",
            cache_refusal="number-mismatch",
        )
    )
    m.observe(make("error", reason="no-capacity", status="error", degraded="cloud-unavailable"))
    got = samples(m.render().decode())
    assert got[("edgeroute_requests_total", (("reason", "short"), ("route", "edge"), ("status", "ok")))] == 1
    assert (
        got[
            ("edgeroute_requests_total", (("reason", "no-capacity"), ("route", "error"), ("status", "error")))
        ]
        == 1
    )
    assert got[("edgeroute_request_latency_seconds_bucket", (("le", "0.25"), ("route", "edge")))] == 1
    assert got[("edgeroute_request_latency_seconds_bucket", (("le", "0.1"), ("route", "edge")))] == 0
    assert got[("edgeroute_request_latency_seconds_count", (("route", "cloud"),))] == 1
    assert got[("edgeroute_ttft_seconds_sum", (("route", "edge"),))] == 0.02
    assert got[("edgeroute_tokens_total", (("kind", "completion"), ("route", "edge")))] == 7
    assert got[("edgeroute_cache_hits_total", (("kind", "exact"),))] == 1
    assert got[("edgeroute_cache_misses_total", ())] == 2
    assert got[("edgeroute_cache_refusals_total", (("reason", "number-mismatch"),))] == 1
    assert got[("edgeroute_fallbacks_total", (("fallback", "member-a->member-b"),))] == 1
    assert got[("edgeroute_degraded_total", (("degraded", "cloud-unavailable"),))] == 1


def test_live_gauges_come_from_edge_and_pool() -> None:
    m = Metrics(lambda: {"written": 3, "dropped_log": 1, "dropped_live": 2})
    pool = Pool([Member("a"), Member("b", healthy=False, circuit="open", failures=4, latency_ms_p50=None)])
    got = samples(m.render(edge=Edge(), pool=pool).decode())
    assert got[("edgeroute_edge_queue_depth", ())] == 4
    assert got[("edgeroute_edge_running", ())] == 1
    assert got[("edgeroute_pool_healthy_members", ())] == 1
    assert got[("edgeroute_pool_member_up", (("member", "a"),))] == 1
    assert got[("edgeroute_pool_member_up", (("member", "b"),))] == 0
    assert got[("edgeroute_pool_member_circuit", (("member", "b"), ("state", "open")))] == 1
    assert got[("edgeroute_pool_member_circuit", (("member", "b"), ("state", "closed")))] == 0
    assert got[("edgeroute_pool_member_failures", (("member", "b"),))] == 4
    assert got[("edgeroute_pool_member_latency_p50_seconds", (("member", "a"),))] == 0.25
    assert ("edgeroute_pool_member_latency_p50_seconds", (("member", "b"),)) not in got
    assert got[("edgeroute_telemetry_written_total", ())] == 3
    assert got[("edgeroute_telemetry_dropped_total", (("where", "live"),))] == 2
    assert ("edgeroute_edge_prefix_reused_tokens_total", ()) not in got  # this edge has no counters
    counted = samples(m.render(edge=CountingEdge()).decode())
    assert counted[("edgeroute_edge_prefix_reused_tokens_total", ())] == 123
    assert counted[("edgeroute_edge_capacity", ())] == 8
    # Without sources, no stale gauges linger from the previous scrape.
    again = samples(m.render().decode())
    assert not any(name.startswith(("edgeroute_pool", "edgeroute_edge")) for name, _ in again)


def test_registry_is_private() -> None:
    m = Metrics()
    m.observe(make("edge"))
    assert (
        REGISTRY.get_sample_value(
            "edgeroute_requests_total", {"route": "edge", "reason": "why", "status": "ok"}
        )
        is None
    )
    Metrics()  # a second node in the same process registers without a clash
