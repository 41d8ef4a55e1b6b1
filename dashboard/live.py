"""The one SSE endpoint every page listens to: new feed rows and refreshed panels.

Events (``event:`` names, matched by ``sse-swap`` in the pages): ``feed`` (new table rows,
newest first), ``stats`` (the overview panel), ``pool`` and ``cache`` (their panels). New
decisions arrive from the telemetry bus in batches; the stats panel is re-rendered at most
every ``stats_interval_s`` and the pool and cache panels every ``tick_s``, so the cost per
client does not grow with the request rate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from litestar import Request, get
from litestar.datastructures import State
from litestar.response import ServerSentEvent, ServerSentEventMessage

from router.telemetry import Subscription, SubscriptionClosedError

from .pages import dashboard_settings, links_of
from .panels import cache_html, feed_rows_html, pool_html, shared_snapshot, stats_html
from .views import node_parts

log = logging.getLogger(__name__)

TOPICS = frozenset({"feed", "stats", "pool", "cache"})
# No cache, and no buffering at a proxy (nginx): each event must reach the page at once.
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def parse_topics(raw: str) -> frozenset[str]:
    chosen = frozenset(t.strip() for t in raw.split(",") if t.strip()) & TOPICS
    return chosen or TOPICS


async def event_stream(
    request: Request[Any, Any, State], topics: frozenset[str], sub: Subscription | None
) -> AsyncIterator[ServerSentEventMessage]:
    parts = node_parts(request.app.state)
    settings = dashboard_settings(request)
    links = links_of(request)
    telemetry = parts.telemetry
    # A comment first, so the browser sees the stream open at once.
    yield ServerSentEventMessage(comment="edgeroute live")
    last_stats = last_tick = time.monotonic()
    stats_dirty = False
    last_batch_at = 0.0
    try:
        while True:
            now = time.monotonic()
            wait = last_tick + settings.tick_s - now
            if stats_dirty:
                wait = min(wait, last_stats + settings.stats_interval_s - now)
            wait = max(wait, 0.0)
            if sub is not None:
                batch = await sub.get(timeout=wait)
            else:
                await asyncio.sleep(wait)
                batch = None
            if batch:
                if "feed" in topics:
                    newest = list(reversed(batch[-settings.feed_rows :]))
                    yield ServerSentEventMessage(data=feed_rows_html(newest, links), event="feed")
                stats_dirty, last_batch_at = True, time.time()
            now = time.monotonic()
            tick_due = now - last_tick >= settings.tick_s
            if "stats" in topics and (
                tick_due or (stats_dirty and now - last_stats >= settings.stats_interval_s)
            ):
                snap = shared_snapshot(telemetry) if telemetry is not None else None
                yield ServerSentEventMessage(data=stats_html(telemetry, snap), event="stats")
                # A shared snapshot taken before the last batch is stale: push again next interval.
                last_stats, stats_dirty = now, snap is not None and snap.ts < last_batch_at
            if tick_due:
                last_tick = now
                if "pool" in topics:
                    yield ServerSentEventMessage(data=await pool_html(parts), event="pool")
                if "cache" in topics:
                    yield ServerSentEventMessage(data=await cache_html(parts), event="cache")
    except SubscriptionClosedError:
        return
    finally:
        if sub is not None and telemetry is not None:
            telemetry.bus.unsubscribe(sub)


@get("/events", name="dashboard:events", include_in_schema=False)
async def events(request: Request[Any, Any, State], topics: str = "") -> ServerSentEvent:
    """Live updates for the page that asked, by topic (comma-separated; default: all)."""
    chosen = parse_topics(topics)
    telemetry = node_parts(request.app.state).telemetry
    # Subscribe before the response starts: the browser sees the stream open with the headers,
    # and a decision published between that and the generator's first step would be lost.
    sub = telemetry.bus.subscribe() if telemetry is not None and chosen & {"feed", "stats"} else None
    return ServerSentEvent(
        event_stream(request, chosen, sub),
        headers=SSE_HEADERS,
    )
