"""Prometheus metrics of the node, on a private registry (never the process-global one)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from .aggregate import LATENCY_BUCKETS, TTFT_BUCKETS, CostEstimate
from .events import DecisionEvent
from .sources import CIRCUIT_STATES, BudgetView, EdgeLoadView, NodeInfo, PoolView

# The text format 0.0.4; the server appends "; charset=utf-8" as it does for every text type.
CONTENT_TYPE: Final = "text/plain; version=0.0.4"

GC_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)


@dataclass(frozen=True, slots=True)
class _Scrape:
    """One scrape's families: the registry's, then the live ones (read now, never registered)."""

    families: list[Metric]

    def collect(self) -> list[Metric]:
        return self.families


def _node_families(node: NodeInfo) -> Iterator[Metric]:
    # The info-metric pattern: a constant 1 whose labels say who the node is; a fleet's queries
    # join on ``instance`` to name nodes, never repeating these labels on every series.
    info = GaugeMetricFamily(
        "edgeroute_node_info",
        "The node's name, edge model and versions (always 1)",
        labels=["node", "edge_model", "edge_model_version", "version", "dashboard_path"],
    )
    info.add_metric(
        [node.name, node.edge_model, node.edge_model_version, node.version, node.dashboard_path], 1.0
    )
    yield info
    draining = "1 while the node drains (SIGTERM): it refuses new requests"
    yield GaugeMetricFamily("edgeroute_node_draining", draining, value=node.draining)


def _cost_families(cost: CostEstimate) -> Iterator[Metric]:
    for name, doc, value in (
        ("edgeroute_spend", "What the answers cost at the configured prices (telemetry.prices), since start", cost.actual),
        ("edgeroute_spend_all_cloud", "What the same answers would have cost all from the cloud, since start", cost.all_cloud),
    ):
        family = CounterMetricFamily(name, doc, labels=["currency"])
        family.add_metric([cost.currency], value)
        yield family


def _budget_families(view: BudgetView) -> Iterator[Metric]:
    """Per tenant with rated semantic hits: the wrong-rate estimate, its bound, the threshold in force."""
    names = {
        "estimate": ("edgeroute_cache_wrong_rate_estimate", "Wrong share of rated semantic hits at the tenant's threshold"),
        "bound": ("edgeroute_cache_wrong_rate_bound", "Upper confidence bound on that share (as `cache calibrate` bounds it)"),
        "threshold": ("edgeroute_cache_verifier_threshold", "The tenant's verifier threshold, moved by its ratings"),
        "rated": ("edgeroute_cache_rated_hits", "Rated semantic hits at the tenant's threshold"),
    }
    yield GaugeMetricFamily(
        "edgeroute_cache_max_wrong_rate",
        "The allowed share of wrong semantic hits (cache.max_wrong_rate)",
        value=view.max_wrong_rate,
    )
    families = {k: GaugeMetricFamily(n, h, labels=["tenant"]) for k, (n, h) in names.items()}
    for tenant, gauges in view.budget_gauges().items():
        for k, family in families.items():
            value = gauges.get(k)
            if value is not None:
                family.add_metric([tenant], float(value))
    yield from families.values()


# Per member: (metric, help, MemberStatusLike attribute, divisor to the unit); a None value is left out.
_GAUGES: Final = (
    ("edgeroute_pool_member_outstanding", "Requests in flight or queued at the member", "outstanding", 1),
    ("edgeroute_pool_member_running", "Requests the member runs", "running", 1),
    ("edgeroute_pool_member_waiting", "Requests queued at the member", "waiting", 1),
    ("edgeroute_pool_member_failures", "Recent failures counted by the breaker", "failures", 1),
    (
        "edgeroute_pool_member_latency_p50_seconds", "Median request latency of the member", "latency_ms_p50", 1e3
    ),
    ("edgeroute_pool_member_ttft_p50_seconds", "Median TTFT of the member", "ttft_ms_p50", 1e3),
)


def _pool_families(pool: PoolView) -> Iterator[Metric]:
    members = list(pool.status())
    up = GaugeMetricFamily("edgeroute_pool_member_up", "1 when the member is healthy", labels=["member"])
    circuit = GaugeMetricFamily(
        "edgeroute_pool_member_circuit",
        "1 for the member's current circuit state",
        labels=["member", "state"],
    )
    gauges = [(GaugeMetricFamily(n, doc, labels=["member"]), attr, div) for n, doc, attr, div in _GAUGES]
    healthy = sum(1 for m in members if m.healthy)
    yield GaugeMetricFamily("edgeroute_pool_healthy_members", "Members able to take requests", value=healthy)
    for m in members:
        up.add_metric([m.name], 1.0 if m.healthy else 0.0)
        for state in CIRCUIT_STATES:
            circuit.add_metric([m.name, state], 1.0 if m.circuit == state else 0.0)
        for family, attr, div in gauges:
            value = getattr(m, attr)
            if value is not None:
                family.add_metric([m.name], value / div)
    yield from (up, circuit)
    yield from (family for family, _, _ in gauges)


class Metrics:
    """Counters and histograms fed by decisions, and gauges read live at scrape time."""

    def __init__(
        self,
        counts: Callable[[], dict[str, int]] | None = None,
        cost: Callable[[], CostEstimate] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "edgeroute_requests",
            "Requests by route, reason and status",
            ["route", "reason", "status"],
            registry=r,
        )
        self.latency, self.ttft = (
            Histogram(name, doc, ["route"], buckets=buckets, registry=r)
            for name, doc, buckets in (
                ("edgeroute_request_latency_seconds", "End-to-end latency by route", LATENCY_BUCKETS),
                ("edgeroute_ttft_seconds", "Time to first token by route", TTFT_BUCKETS),
            )
        )
        self.gc_pause = Histogram(
            "edgeroute_gc_pause_seconds",
            "Garbage-collector pauses by generation (every thread waits them out)",
            ["generation"],
            buckets=GC_BUCKETS,
            registry=r,
        )
        self.tokens = Counter("edgeroute_tokens", "Tokens by route and kind", ["route", "kind"], registry=r)
        self.fallbacks = Counter(
            "edgeroute_fallbacks", "Fallbacks by kind (from->to)", ["fallback"], registry=r
        )
        self.degraded = Counter("edgeroute_degraded", "Degraded answers by cause", ["degraded"], registry=r)
        self.cache_hits = Counter("edgeroute_cache_hits", "Cache hits by kind", ["kind"], registry=r)
        self.cache_misses = Counter(
            "edgeroute_cache_misses", "Cache lookups that found nothing to serve", registry=r
        )
        self.cache_refusals = Counter(
            "edgeroute_cache_refusals",
            "Near-duplicates refused by a guard, by reason",
            ["reason"],
            registry=r,
        )
        self.pool_events = Counter(
            "edgeroute_pool_events",
            "Cloud pool outcomes by kind (started, success, failure, retry, ejected...) and member",
            ["kind", "member"],
            registry=r,
        )
        # Each route's series exists from the start, at 0: Prometheus's rate() over a window has
        # no increase before a series' first sample, so a series born with a node's first requests
        # would hide them from the fleet's windowed figures.
        for route in ("cache-exact", "cache-semantic", "edge", "cloud"):
            self.latency.labels(route)
            self.ttft.labels(route)
        for kind in ("exact", "semantic"):
            self.cache_hits.labels(kind)
        self._counts = counts or dict
        self._cost = cost

    def observe(self, event: DecisionEvent) -> None:
        self.requests.labels(event.route, event.reason, event.status).inc()
        self.latency.labels(event.route).observe(event.latency_ms / 1000)
        if event.ttft_ms is not None:
            self.ttft.labels(event.route).observe(event.ttft_ms / 1000)
        if event.prompt_tokens:
            self.tokens.labels(event.route, "prompt").inc(event.prompt_tokens)
        if event.completion_tokens:
            self.tokens.labels(event.route, "completion").inc(event.completion_tokens)
        if event.fallback:
            self.fallbacks.labels(event.fallback).inc()
        if event.degraded:
            self.degraded.labels(event.degraded).inc()
        if event.is_cache_hit:
            self.cache_hits.labels(event.route.removeprefix("cache-")).inc()
        elif event.cache == "miss":
            self.cache_misses.inc()
        if event.cache_refusal:
            self.cache_refusals.labels(event.cache_refusal).inc()

    def render(
        self, edge: EdgeLoadView | None = None, pool: PoolView | None = None, node: NodeInfo | None = None,
        budget: BudgetView | None = None,
    ) -> bytes:
        """The Prometheus text exposition, with the live gauges of ``edge``, ``pool``, ``node`` and ``budget``."""
        return generate_latest(_Scrape([*self.registry.collect(), *self._live(edge, pool, node, budget)]))

    def _live(
        self, edge: EdgeLoadView | None, pool: PoolView | None, node: NodeInfo | None, budget: BudgetView | None
    ) -> Iterator[Metric]:
        """Gauges read at scrape time from the node, the edge engine, the cloud pool and the cache."""
        if node is not None:
            yield from _node_families(node)
        if self._cost is not None:
            yield from _cost_families(self._cost())
        if edge is not None:
            load = edge.load()
            for name, doc, value in (
                ("edgeroute_edge_running", "Requests the edge engine is generating now", load.running),
                ("edgeroute_edge_queue_depth", "Requests waiting in the edge queue", load.waiting),
                ("edgeroute_edge_capacity", "Requests the edge engine runs at once", load.capacity),
            ):
                yield GaugeMetricFamily(name, doc, value=value)
            stats = getattr(edge, "stats", None)  # the llama.cpp engine's counters, if it has them
            if callable(stats):
                yield CounterMetricFamily(
                    "edgeroute_edge_prefix_reused_tokens",
                    "Prompt tokens whose KV the edge reused from a slot instead of evaluating them",
                    value=stats().prefix_reused_tokens,
                )
        if pool is not None:
            yield from _pool_families(pool)
        if budget is not None:
            yield from _budget_families(budget)
        counts = self._counts()
        written = CounterMetricFamily("edgeroute_telemetry_written", "Decisions written to the telemetry log")
        written.add_metric([], counts.get("written", 0))
        dropped = CounterMetricFamily(
            "edgeroute_telemetry_dropped",
            "Decisions lost (log write failed or live client too slow)",
            labels=["where"],
        )
        dropped.add_metric(["log"], counts.get("dropped_log", 0))
        dropped.add_metric(["live"], counts.get("dropped_live", 0))
        yield from (written, dropped)
