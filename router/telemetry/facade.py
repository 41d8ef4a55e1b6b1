"""``Telemetry``: the one object the request path and the dashboard talk to."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from pathlib import Path

from .aggregate import Aggregator, Snapshot
from .bus import EventBus
from .config import TelemetrySettings
from .events import DecisionEvent
from .gcwatch import GcWatch
from .metrics import Metrics
from .store import DecisionStore, find_decision

log = logging.getLogger(__name__)


class Telemetry:
    """Records every decision to the SQLite log, the live bus, the rolling numbers and /metrics.

    ``record`` is synchronous, cheap (microseconds) and never raises for I/O reasons: the write
    to SQLite happens later on the store's own thread.
    """

    def __init__(self, settings: TelemetrySettings, data_dir: Path) -> None:
        self.settings = settings
        self.db_path = data_dir / settings.db_file
        self.store: DecisionStore | None = None
        if settings.enabled:
            self.store = DecisionStore(
                self.db_path,
                write_interval_s=settings.write_interval_s,
                write_batch=settings.write_batch,
                retention_s=settings.retention_days * 86400,
                max_rows=settings.max_rows,
            )
        self.bus = EventBus(settings.bus_interval_ms / 1000, settings.bus_queue)
        self.aggregator = Aggregator(settings)
        self.metrics = Metrics(self._counts, self.aggregator.cost)
        self._recent: deque[DecisionEvent] = deque(maxlen=settings.recent)
        self._snap: tuple[float, Snapshot] | None = None

    def record(self, event: DecisionEvent) -> None:
        self._recent.append(event)
        self.aggregator.add(event)
        self.metrics.observe(event)
        if self.store is not None:
            self.store.put(event)
        self.bus.publish(event)

    def watch_gc(self, *, freeze: bool) -> GcWatch:
        """Time the collector's pauses into /metrics (``edgeroute_gc_pause_seconds``); with
        ``freeze``, the heap as it is now is left out of every later collection. Close it to undo."""
        # Children made now: the callback then takes no family lock while the collector runs.
        pauses = [self.metrics.gc_pause.labels(str(g)) for g in range(3)]
        watch = GcWatch(lambda generation, seconds: pauses[min(generation, 2)].observe(seconds))
        watch.start(freeze=freeze)
        return watch

    def pool_event(self, kind: str, member: str | None) -> None:
        """Count one cloud pool outcome (``member`` is None for pool-wide ones such as unavailable)."""
        self.metrics.pool_events.labels(kind, member or "").inc()
        if kind in ("ejected", "readmitted", "unavailable"):
            log.info("cloud pool: %s %s", kind, member or "")

    def snapshot(self, max_age_s: float = 0.0) -> Snapshot:
        """The dashboard's rolling numbers; one computed up to ``max_age_s`` ago may be reused."""
        now = time.monotonic()
        if self._snap is not None and max_age_s > 0 and now - self._snap[0] <= max_age_s:
            return self._snap[1]
        snap = self.aggregator.snapshot()
        self._snap = (now, snap)
        return snap

    def recent(self, limit: int | None = None) -> list[DecisionEvent]:
        """The latest decisions kept in memory, newest first."""
        return list(reversed(self._recent))[:limit]

    async def find(self, request_id: str) -> DecisionEvent | None:
        """One decision by request id: from memory, else from the log."""
        for event in reversed(self._recent):
            if event.request_id == request_id:
                return event
        if self.store is None or not self.db_path.is_file():
            return None
        await self.store.flush()
        return await asyncio.to_thread(find_decision, self.db_path, request_id)

    def _counts(self) -> dict[str, int]:
        live = self.bus.dropped
        if self.store is None:
            return {"dropped_live": live}
        return {"written": self.store.written, "dropped_log": self.store.dropped, "dropped_live": live}

    async def aclose(self) -> None:
        """End live subscriptions and write out the log."""
        await self.bus.aclose()
        if self.store is not None:
            await self.store.aclose()
