"""Rolling numbers: rates, split over time, hit rates, nearest-rank percentiles, cost saved."""

from __future__ import annotations

import pytest

from router.telemetry import DecisionEvent, TelemetrySettings
from router.telemetry.config import PriceSettings
from router.telemetry.aggregate import Aggregator, bucket_index, percentile


class Clock:
    def __init__(self, now: float = 10_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make(route: str = "edge", **fields: object) -> DecisionEvent:
    base: dict[str, object] = dict(
        ts=0.0, request_id="r", tenant="t", model="auto", route=route, reason="why"
    )
    base.update(fields)
    return DecisionEvent(**base)  # type: ignore[arg-type]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (50.0, 95.0, 99.0)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_latency_buckets() -> None:
    assert [bucket_index(v) for v in (1, 5, 5.1, 999, 1000, 10_000, 10_001)] == [0, 0, 1, 7, 7, 10, 11]


def test_rate_split_and_percentiles_per_route() -> None:
    clock = Clock()
    agg = Aggregator(TelemetrySettings(window_s=60, rate_window_s=10), clock)
    for second in range(10):
        clock.now = 10_000.0 + second
        for k in range(3):
            agg.add(make("edge", latency_ms=float(second * 3 + k + 1), ttft_ms=1.0))
        agg.add(make("cloud", latency_ms=1000.0, ttft_ms=200.0))
    clock.now = 10_010.5
    snap = agg.snapshot()
    assert snap.rps == 4.0
    assert snap.split == {"edge": 30, "cloud": 10}
    assert snap.total == 40 and snap.window_requests == 40
    edge, cloud = snap.routes
    assert (edge.route, edge.requests) == ("edge", 30)
    assert (edge.latency.p50, edge.latency.p95, edge.latency.p99) == (15.0, 29.0, 30.0)
    assert (edge.ttft.p50, edge.ttft.count) == (1.0, 30)
    assert (cloud.latency.p50, cloud.ttft.p99) == (1000.0, 200.0)
    assert cloud.histogram[7] == 10 and sum(cloud.histogram) == 10
    assert sum(sum(p.counts.values()) for p in snap.series) == 40
    assert len(snap.series) == 60 and snap.series_step_s == 1


def test_window_expiry_keeps_totals() -> None:
    clock = Clock()
    agg = Aggregator(TelemetrySettings(window_s=30, rate_window_s=10), clock)
    agg.add(make("edge", latency_ms=5.0))
    clock.now += 31
    agg.add(make("cloud", latency_ms=7.0))
    snap = agg.snapshot()
    assert snap.split == {"cloud": 1}
    assert snap.totals_by_route == {"edge": 1, "cloud": 1}
    assert [r.route for r in snap.routes] == ["cloud"]
    clock.now += 100
    snap = agg.snapshot()
    assert (snap.rps, snap.window_requests, snap.total, snap.routes) == (0.0, 0, 2, ())


def test_hit_rates_count_only_lookups() -> None:
    agg = Aggregator(TelemetrySettings(), Clock())
    agg.add(make("cache-exact"))
    agg.add(make("cache-semantic", similarity=0.96))
    agg.add(make("cache-semantic", similarity=0.93))
    agg.add(make("edge", cache="miss", cache_refusal="negation"))
    agg.add(make("edge", private=True))  # private: the cache was not consulted
    snap = agg.snapshot()
    assert snap.lookups == 4
    assert snap.exact_hit_rate == 0.25 and snap.semantic_hit_rate == 0.5
    assert snap.refusals == {"negation": 1}


def test_no_lookups_means_no_hit_rate() -> None:
    agg = Aggregator(TelemetrySettings(), Clock())
    agg.add(make("edge"))
    snap = agg.snapshot()
    assert (snap.lookups, snap.exact_hit_rate, snap.semantic_hit_rate) == (0, None, None)


def test_cost_saved_against_all_cloud() -> None:
    prices = PriceSettings(
        cloud_prompt_per_1k=1.0, cloud_completion_per_1k=2.0, edge_per_1k=0.1, cache_per_1k=0.0
    )
    agg = Aggregator(TelemetrySettings(prices=prices), Clock())
    agg.add(make("cloud", prompt_tokens=1000, completion_tokens=500))  # 1 + 1 = 2.0 either way
    agg.add(make("edge", prompt_tokens=1000, completion_tokens=1000))  # cloud 3.0, edge 0.2
    agg.add(make("cache-exact", prompt_tokens=500, completion_tokens=500))  # cloud 1.5, cache 0
    agg.add(make("error", status="error", prompt_tokens=1000))  # no answer: not counted
    cost = agg.snapshot().cost
    assert cost.all_cloud == pytest.approx(6.5)
    assert cost.actual == pytest.approx(2.2)
    assert cost.saved == pytest.approx(4.3)
    assert cost.saved_pct == pytest.approx(100 * 4.3 / 6.5)
    assert cost.currency == "USD"


def test_fallbacks_degraded_and_reasons() -> None:
    agg = Aggregator(TelemetrySettings(), Clock())
    agg.add(make("edge", reason="cloud-unhealthy", fallback="cloud->edge", degraded="cloud-unavailable"))
    agg.add(make("edge", reason="cloud-unhealthy", fallback="cloud->edge"))
    agg.add(make("cloud", reason="complex", fallback="member-a->member-b"))
    agg.add(make("error", reason="no-capacity", status="error"))
    snap = agg.snapshot()
    assert snap.fallbacks == {"cloud->edge": 2, "member-a->member-b": 1}
    assert snap.degraded == {"cloud-unavailable": 1}
    assert snap.reasons[0] == ("edge", "cloud-unhealthy", 2)
    assert snap.errors == 1
