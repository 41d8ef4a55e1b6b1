"""In-process pub/sub of decisions for the dashboard's live stream, delivered in timed batches.

Publishing appends to a list; one task per bus hands the accumulated batch to every subscriber
each ``interval_s``. At 100 requests/s and 250 ms that is 4 deliveries a second per client
instead of 100, and nothing at all runs while nobody is subscribed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from .errors import SubscriptionClosedError
from .events import DecisionEvent

_CLOSED = object()


class Subscription:
    """One subscriber's queue of batches; leave it with ``EventBus.unsubscribe``."""

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize=maxsize + 1)
        self._maxsize = maxsize
        self.dropped = 0
        self.closed = False

    def _deliver(self, batch: list[DecisionEvent]) -> None:
        # A client that cannot keep up loses its oldest batches, never the bus's time.
        while self._queue.qsize() >= self._maxsize:
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(batch)

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(_CLOSED)

    async def get(self, timeout: float | None = None) -> list[DecisionEvent] | None:
        """The next batch, or None after ``timeout`` seconds without one; SubscriptionClosedError
        once the bus is closed."""
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            raise SubscriptionClosedError("the telemetry bus is closed")
        assert isinstance(item, list)
        return item


class EventBus:
    """Fan-out of decisions to subscribers, batched every ``interval_s``."""

    def __init__(self, interval_s: float = 0.25, queue_batches: int = 64) -> None:
        self.interval_s = interval_s
        self.queue_batches = queue_batches
        self._subscribers: list[Subscription] = []
        self._pending: list[DecisionEvent] = []
        # publish() may come from a worker thread (pool callbacks); the flusher runs on the loop.
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._dropped_gone = 0

    @property
    def dropped(self) -> int:
        """Batches lost to slow subscribers, over the bus's life."""
        return self._dropped_gone + sum(s.dropped for s in self._subscribers)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, event: DecisionEvent) -> None:
        """Queue an event for the next batch; free when nobody is subscribed."""
        if not self._subscribers:
            return
        with self._lock:
            self._pending.append(event)

    def subscribe(self) -> Subscription:
        """A new subscription (call on the event loop)."""
        sub = Subscription(self.queue_batches)
        if self._closed:
            sub._close()
            return sub
        self._subscribers.append(sub)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_loop(), name="telemetry-bus")
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)
            self._dropped_gone += sub.dropped
        sub._close()

    def flush(self) -> int:
        """Deliver what is pending now; return the batch size (the flusher calls this on its tick)."""
        with self._lock:
            batch, self._pending = self._pending, []
        if batch:
            for sub in list(self._subscribers):
                sub._deliver(batch)
        return len(batch)

    async def _flush_loop(self) -> None:
        while self._subscribers and not self._closed:
            await asyncio.sleep(self.interval_s)
            self.flush()
        with self._lock:
            self._pending.clear()

    async def aclose(self) -> None:
        """Deliver what is pending, then end every subscription."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        for sub in list(self._subscribers):
            self.unsubscribe(sub)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
