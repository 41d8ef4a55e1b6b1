"""Rolling numbers for the dashboard: rates, route split over time, hit rates, percentiles, cost."""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from .config import TelemetrySettings
from .events import ROUTES, DecisionEvent

# Upper edges (s) of every latency histogram, from a cache hit (~1 ms) to a long cloud generation:
# /metrics' request latency has them all, its TTFT those up to 10 s, the dashboard's chart (in ms)
# those from 5 ms to 10 s, its last bucket open.
LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TTFT_BUCKETS: Final = LATENCY_BUCKETS[:13]
LATENCY_EDGES_MS: Final = tuple(round(edge * 1000, 1) for edge in LATENCY_BUCKETS[2:13])
SERIES_POINTS: Final = 60
# Percentiles use at most this many recent samples per route (100 req/s for 5 min is 30k in all).
_MAX_SAMPLES: Final = 10_000


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of already sorted values; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def bucket_index(latency_ms: float) -> int:
    """The histogram bucket of a latency: the first whose upper edge it does not pass."""
    return bisect.bisect_left(LATENCY_EDGES_MS, latency_ms)


@dataclass(frozen=True, slots=True)
class Percentiles:
    count: int
    p50: float | None
    p95: float | None
    p99: float | None

    @classmethod
    def of(cls, values: list[float]) -> Percentiles:
        values.sort()
        return cls(len(values), percentile(values, 50), percentile(values, 95), percentile(values, 99))


def prediction_error(event: DecisionEvent) -> float | None:
    """The relative error of the first-token time predicted for the side that answered (a
    streamed engine answer with no fallback; None for anything else or with no prediction)."""
    if event.route not in ("edge", "cloud") or event.status != "ok" or not event.stream or event.fallback:
        return None
    predicted = event.features.get(f"{event.route}_ttft_s")
    if predicted is None or not event.ttft_ms:
        return None
    return abs(predicted * 1000.0 - event.ttft_ms) / event.ttft_ms


@dataclass(frozen=True, slots=True)
class RouteStats:
    """One route over the window: its latency and TTFT percentiles and latency distribution."""

    route: str
    requests: int
    latency: Percentiles
    ttft: Percentiles
    histogram: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    start: float
    counts: dict[str, int]


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """Since the node started: what was spent, what all-cloud would have cost, the difference."""

    currency: str
    actual: float
    all_cloud: float

    @property
    def saved(self) -> float:
        return self.all_cloud - self.actual

    @property
    def saved_pct(self) -> float | None:
        return None if self.all_cloud <= 0 else 100.0 * self.saved / self.all_cloud


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the overview shows, computed at ``ts``."""

    ts: float
    window_s: int
    series_step_s: int
    total: int
    totals_by_route: dict[str, int]
    errors: int
    rps: float
    window_requests: int
    split: dict[str, int]
    series: tuple[SeriesPoint, ...]
    lookups: int
    exact_hit_rate: float | None
    semantic_hit_rate: float | None
    routes: tuple[RouteStats, ...]
    fallbacks: dict[str, int]
    degraded: dict[str, int]
    reasons: tuple[tuple[str, str, int], ...]
    refusals: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cost: CostEstimate
    # |predicted - observed| / observed first-token time of the streamed engine answers in the window
    ttft_prediction_error: Percentiles | None = None


@dataclass(slots=True)
class _Second:
    second: int
    routes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[tuple[str, str]] = field(default_factory=Counter)
    # (route, latency bucket) -> requests: the distribution chart sums these, never raw samples.
    buckets: Counter[tuple[str, int]] = field(default_factory=Counter)
    lookups: int = 0


class Aggregator:
    """Keeps per-second counts over a rolling window plus running totals since start."""

    def __init__(self, settings: TelemetrySettings, clock: Callable[[], float] = time.time) -> None:
        self.prices = settings.prices
        self.window_s = settings.window_s
        self.rate_window_s = min(settings.rate_window_s, settings.window_s)
        self.clock = clock
        self._lock = threading.Lock()
        self._seconds: deque[_Second] = deque()
        # Per route: (recorded at, latency ms, TTFT ms) for the percentiles; bounded per route.
        self._samples: dict[str, deque[tuple[float, float, float | None]]] = {
            route: deque(maxlen=_MAX_SAMPLES) for route in ROUTES
        }
        self._totals: Counter[str] = Counter()
        self._errors = 0
        self._fallbacks: Counter[str] = Counter()
        self._degraded: Counter[str] = Counter()
        self._refusals: Counter[str] = Counter()
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._cost_actual = 0.0
        self._cost_cloud = 0.0
        self._prediction_errors: deque[tuple[float, float]] = deque(maxlen=_MAX_SAMPLES)

    def cost(self) -> CostEstimate:
        """Spent and all-cloud cost since start (what ``/metrics`` exports as counters)."""
        with self._lock:
            return CostEstimate(self.prices.currency, self._cost_actual, self._cost_cloud)

    def add(self, event: DecisionEvent) -> None:
        now = self.clock()
        with self._lock:
            sec = int(now)
            if not self._seconds or self._seconds[-1].second != sec:
                self._seconds.append(_Second(sec))
                self._expire(now)
            bucket = self._seconds[-1]
            bucket.routes[event.route] += 1
            bucket.reasons[(event.route, event.reason)] += 1
            bucket.buckets[(event.route, bucket_index(event.latency_ms))] += 1
            if event.cache is not None:
                bucket.lookups += 1
            self._samples[event.route].append((now, event.latency_ms, event.ttft_ms))
            self._totals[event.route] += 1
            if event.status == "error":
                self._errors += 1
            if event.fallback:
                self._fallbacks[event.fallback] += 1
            if event.degraded:
                self._degraded[event.degraded] += 1
            if event.cache_refusal:
                self._refusals[event.cache_refusal] += 1
            self._prompt_tokens += event.prompt_tokens
            self._completion_tokens += event.completion_tokens
            # Failed requests produced nothing: they count on neither side of the estimate.
            if (error := prediction_error(event)) is not None:
                self._prediction_errors.append((now, error))
            if event.status == "ok" and event.route != "error":
                self._cost_actual += self.prices.cost(event.route, event.prompt_tokens, event.completion_tokens)
                self._cost_cloud += self.prices.cost("cloud", event.prompt_tokens, event.completion_tokens)

    def _expire(self, now: float) -> None:
        horizon = now - self.window_s
        while self._seconds and self._seconds[0].second < int(horizon):
            self._seconds.popleft()
        for samples in (*self._samples.values(), self._prediction_errors):
            while samples and samples[0][0] < horizon:
                samples.popleft()

    def snapshot(self) -> Snapshot:
        now = self.clock()
        with self._lock:
            self._expire(now)
            seconds = list(self._seconds)
            latencies = {r: [lat for _, lat, _ in self._samples[r]] for r in ROUTES}
            ttfts = {r: [t for _, _, t in self._samples[r] if t is not None] for r in ROUTES}
            prediction_errors = [e for _, e in self._prediction_errors]
            totals = dict(self._totals)
            fallbacks, degraded, refusals = dict(self._fallbacks), dict(self._degraded), dict(self._refusals)
            errors, ptok, ctok = self._errors, self._prompt_tokens, self._completion_tokens
            cost = CostEstimate(self.prices.currency, self._cost_actual, self._cost_cloud)

        split: Counter[str] = Counter()
        reasons: Counter[tuple[str, str]] = Counter()
        hist: Counter[tuple[str, int]] = Counter()
        lookups = 0
        recent = 0
        rate_from = int(now) - self.rate_window_s
        step = max(1, self.window_s // SERIES_POINTS)
        first = int(now) - self.window_s + 1
        points = [SeriesPoint(float(first + i * step), Counter()) for i in range(math.ceil(self.window_s / step))]
        for s in seconds:
            split.update(s.routes)
            reasons.update(s.reasons)
            hist.update(s.buckets)
            lookups += s.lookups
            # The current second is partial: count the rate over full seconds before it.
            if rate_from <= s.second < int(now):
                recent += sum(s.routes.values())
            if 0 <= (idx := (s.second - first) // step) < len(points):
                points[idx].counts.update(s.routes)

        routes = tuple(
            RouteStats(
                route=route,
                requests=split[route],
                latency=Percentiles.of(latencies[route]),
                ttft=Percentiles.of(ttfts[route]),
                histogram=tuple(hist[(route, i)] for i in range(len(LATENCY_EDGES_MS) + 1)),
            )
            for route in ROUTES
            if split.get(route)
        )
        exact, semantic = split.get("cache-exact", 0), split.get("cache-semantic", 0)
        return Snapshot(
            ts=now,
            window_s=self.window_s,
            series_step_s=step,
            total=sum(totals.values()),
            totals_by_route=totals,
            errors=errors,
            rps=recent / self.rate_window_s,
            window_requests=sum(split.values()),
            split=dict(split),
            series=tuple(points),
            lookups=lookups,
            exact_hit_rate=exact / lookups if lookups else None,
            semantic_hit_rate=semantic / lookups if lookups else None,
            routes=routes,
            fallbacks=fallbacks,
            degraded=degraded,
            reasons=tuple((r, why, n) for (r, why), n in reasons.most_common(12)),
            refusals=refusals,
            prompt_tokens=ptok,
            completion_tokens=ctok,
            cost=cost,
            ttft_prediction_error=Percentiles.of(prediction_errors) if prediction_errors else None,
        )
