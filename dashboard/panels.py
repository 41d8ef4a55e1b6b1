"""HTML of each live panel, shared by the full pages and the SSE stream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from router.telemetry import ROUTES, DecisionEvent, Snapshot, Telemetry

from .charts import latency_chart, share_bar, split_chart
from .render import render
from .views import CacheView, FeedbackView, NodeParts, resolve

SNAPSHOT_MAX_AGE_S = 0.5
SEARCH_LIMIT = 50
NOT_CONFIGURED = "The cache is not configured on this node."

# Cache stats keys drawn in their own places; anything else the cache reports goes in a table.
_CACHE_KNOWN = {"entries", "size_bytes", "evictions", "refusals", "entries_per_tenant"}


@dataclass(frozen=True, slots=True)
class Links:
    """URLs of the dashboard, relative to where it is mounted."""

    base: str
    # The node has API keys: the header offers a log-out button.
    logout: bool = False

    @property
    def static(self) -> str:
        return f"{self.base}/static"


def shared_snapshot(telemetry: Telemetry) -> Snapshot:
    """Every open tab asks about once a second: they share one snapshot per half second."""
    return telemetry.snapshot(max_age_s=SNAPSHOT_MAX_AGE_S)


def stats_html(telemetry: Telemetry | None, snap: Snapshot | None = None) -> str:
    if telemetry is None:
        return render("_stats.html", snap=None, routes=ROUTES)
    snap = snap or shared_snapshot(telemetry)
    return render(
        "_stats.html",
        snap=snap,
        routes=ROUTES,
        split=split_chart(snap),
        latency=latency_chart(snap),
        share=share_bar(snap.split),
        fallbacks_total=sum(snap.fallbacks.values()),
    )


def feed_rows_html(events: Sequence[DecisionEvent], links: Links) -> str:
    """Table rows, newest first."""
    return render("_feed_rows.html", events=events, links=links)


async def pool_html(parts: NodeParts) -> str:
    members: list[Any] | None = None
    if parts.pool is not None:
        members = sorted(await resolve(parts.pool.status()), key=lambda m: m.name)
    edge = parts.edge.load() if parts.edge is not None else None
    return render("_pool.html", members=members, edge=edge)


async def cache_html(parts: NodeParts) -> str:
    refusals_seen = shared_snapshot(parts.telemetry).refusals if parts.telemetry is not None else {}
    if parts.cache is None:
        return render("_cache_stats.html", stats=None, per_tenant={}, refusals=refusals_seen, other={})
    stats = dict(await resolve(parts.cache.stats()))
    per_tenant = dict(await resolve(parts.cache.entries_per_tenant()))
    refusals = stats.get("refusals")
    if not isinstance(refusals, Mapping):
        refusals = refusals_seen
    other = {
        k: v for k, v in stats.items() if k not in _CACHE_KNOWN and isinstance(v, (int, float, str, bool))
    }
    return render(
        "_cache_stats.html",
        stats=stats,
        per_tenant=dict(sorted(per_tenant.items(), key=lambda kv: (-kv[1], kv[0]))),
        refusals=dict(sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0]))),
        other=other,
    )


async def search_html(
    cache: CacheView | None, links: Links, query: str, tenant: str, *, listed: bool = True
) -> str:
    """Cache entries matching ``query`` (and ``tenant``); ``listed=False``: the hint to search first."""
    if cache is None:
        return render("_cache_results.html", entries=None, links=links, message=NOT_CONFIGURED)
    entries = await resolve(cache.search(query, tenant or None, SEARCH_LIMIT)) if listed else None
    return render("_cache_results.html", entries=entries, links=links, query=query, tenant=tenant, message="")


REVIEW_LIMIT = 50


async def review_html(cache: Any, links: Links) -> str:
    """The review queue: recent semantic hits, each with one-click right / wrong (operators only)."""
    if not isinstance(cache, FeedbackView):
        return ""
    rows = list(await resolve(cache.review_queue(None, REVIEW_LIMIT)))
    return render("_cache_review.html", rows=rows, base=links.base)


async def budget_html(cache: Any) -> str:
    """Per tenant: the threshold in force, the wrong-rate estimate and bound, the threshold history."""
    if not isinstance(cache, FeedbackView):
        return ""
    status = dict(await resolve(cache.budget_status(None)))
    return render("_cache_budget.html", tenants=dict(sorted(status.items())))
