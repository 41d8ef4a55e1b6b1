"""Replay: re-decide logged traffic under other settings and estimate how shares, latency and cost move."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..policy.features import Features, Policy, Target, features_from_dict
from ..policy.rules import decide
from ..telemetry.config import PriceSettings
from ..telemetry.errors import TelemetryError
from ..telemetry.events import DecisionEvent
from ..telemetry.store import read_decisions


def first_hop(event: DecisionEvent) -> Target | None:
    """Where the policy sent a logged request (before any fallback), or None when no policy
    decision ran it (a cache hit, an error)."""
    if event.route not in ("edge", "cloud"):
        return None
    if event.fallback:
        return "edge" if event.fallback.split("->", 1)[0].strip() == "edge" else "cloud"
    return "edge" if event.route == "edge" else "cloud"


def read_decisions_db(db_path: Path, limit: int | None = None) -> list[DecisionEvent]:
    """The newest ``limit`` (default all) rows of telemetry's ``decisions`` table, oldest first."""
    if not Path(db_path).is_file():
        raise ConfigError(f"no telemetry database at {db_path}; serve some traffic first", param="db")
    try:
        return read_decisions(db_path, limit)
    except TelemetryError as exc:
        raise ConfigError(f"cannot read decisions from {db_path}: {exc.message}", param="db") from exc


def _latency_models(records: Sequence[DecisionEvent]) -> dict[str, tuple[float, float]]:
    """Per route: (TTFT ms, ms per completion token), medians over its logged requests; a request's
    latency is estimated as TTFT + completion_tokens * ms per token."""
    models: dict[str, tuple[float, float]] = {}
    for route in ("edge", "cloud"):
        # Requests that fell back spent time on both sides, so they would distort either model.
        runs = [r for r in records if r.route == route and not r.fallback and r.latency_ms > 0]
        if not runs:
            continue
        ttfts = [r.ttft_ms for r in runs if r.ttft_ms is not None]
        ttft = statistics.median(ttfts) if ttfts else 0.0
        per_token = [
            max(0.0, r.latency_ms - (r.ttft_ms if r.ttft_ms is not None else ttft)) / r.completion_tokens
            for r in runs
            if r.completion_tokens > 0
        ]
        models[route] = (ttft, statistics.median(per_token) if per_token else 0.0)
    return models


@dataclass(frozen=True, slots=True)
class Side:
    """One column of the replay table."""

    edge: int
    cloud: int
    latency_ms_mean: float
    latency_ms_p50: float
    cost: float

    @property
    def cloud_share(self) -> float:
        total = self.edge + self.cloud
        return self.cloud / total if total else 0.0


@dataclass(frozen=True, slots=True)
class ReplayReport:
    total: int  # logged records read
    replayed: int  # routed by the policy and with usable features
    skipped: int  # routed but without usable features
    changed: int
    edge_to_cloud: int
    cloud_to_edge: int
    logged: Side
    replay: Side
    reasons: dict[str, int] = field(default_factory=dict)  # replayed decisions by reason
    unestimated: int = 0  # changed requests whose new route had no logged traffic to estimate from

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["logged"]["cloud_share"] = self.logged.cloud_share
        d["replay"]["cloud_share"] = self.replay.cloud_share
        return d


def _side(rows: Sequence[tuple[str, float, float]]) -> Side:
    latencies = [latency for _, latency, _ in rows]
    return Side(
        edge=sum(target == "edge" for target, _, _ in rows),
        cloud=sum(target == "cloud" for target, _, _ in rows),
        latency_ms_mean=statistics.fmean(latencies) if latencies else 0.0,
        latency_ms_p50=statistics.median(latencies) if latencies else 0.0,
        cost=sum(cost for _, _, cost in rows),
    )


def replay(records: Iterable[DecisionEvent], policy: Policy, prices: PriceSettings) -> ReplayReport:
    """Re-decide every routed record with ``policy``; changed requests get an estimated latency and
    the cost at ``prices`` (the dashboard's cost model)."""
    logged = list(records)
    models = _latency_models(logged)
    before: list[tuple[str, float, float]] = []  # (target, latency ms, cost) as logged
    after: list[tuple[str, float, float]] = []  # the same, re-decided
    reasons: dict[str, int] = {}
    skipped = unestimated = 0
    for r in logged:
        old = first_hop(r)
        if old is None:
            continue
        try:
            feats: Features = features_from_dict(r.features or {})
        except (TypeError, ValueError):
            skipped += 1
            continue
        decision = decide(policy, feats)
        reasons[decision.reason] = reasons.get(decision.reason, 0) + 1
        spent = prices.cost(r.route, r.prompt_tokens, r.completion_tokens)  # where it ran, fallbacks included
        latency, price = r.latency_ms, spent
        if decision.target != old:
            price = prices.cost(decision.target, r.prompt_tokens, r.completion_tokens)
            if decision.target not in models:
                unestimated += 1
            else:
                ttft, per_token = models[decision.target]
                latency = ttft + r.completion_tokens * per_token
        before.append((old, r.latency_ms, spent))
        after.append((decision.target, latency, price))
    changed_from = [a for (a, _, _), (b, _, _) in zip(before, after, strict=True) if a != b]
    return ReplayReport(
        total=len(logged),
        replayed=len(before),
        skipped=skipped,
        changed=len(changed_from),
        edge_to_cloud=changed_from.count("edge"),
        cloud_to_edge=changed_from.count("cloud"),
        logged=_side(before),
        replay=_side(after),
        reasons=dict(sorted(reasons.items())),
        unestimated=unestimated,
    )


def format_report(report: ReplayReport, threshold: float) -> str:
    """The table ``edgeroute router replay`` prints."""
    a, b = report.logged, report.replay
    rows = [
        (name, f"{x:{fmt}}", f"{y:{fmt}}", f"{y - x:+{fmt}}")
        for name, x, y, fmt in (
            ("edge requests", a.edge, b.edge, "d"),
            ("cloud requests", a.cloud, b.cloud, "d"),
            ("latency mean ms", a.latency_ms_mean, b.latency_ms_mean, ".1f"),
            ("latency p50 ms", a.latency_ms_p50, b.latency_ms_p50, ".1f"),
            ("cost", a.cost, b.cost, ".4f"),
        )
    ]
    change = f"{(b.cloud_share - a.cloud_share) * 100:+.1f} pp"
    rows.insert(2, ("cloud share", f"{a.cloud_share:.1%}", f"{b.cloud_share:.1%}", change))
    lines = [
        f"replay at complexity threshold {threshold:g}: {report.replayed} of {report.total} logged requests "
        f"re-decided ({report.skipped} without usable features skipped; cache hits and errors unchanged)",
        f"{'':<18}{'logged':>10}{'replayed':>10}{'change':>12}",
        *(f"{name:<18}{x:>10}{y:>10}{d:>12}" for name, x, y, d in rows),
        f"changed decisions: {report.changed} "
        f"(edge->cloud {report.edge_to_cloud}, cloud->edge {report.cloud_to_edge})",
        "replayed reasons: " + (", ".join(f"{k} {v}" for k, v in report.reasons.items()) or "-"),
    ]
    if report.unestimated:
        lines.append(
            f"note: {report.unestimated} changed request(s) kept their logged latency: "
            "no logged traffic on their new route to estimate from"
        )
    return "\n".join(lines)
