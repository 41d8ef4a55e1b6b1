"""The live bus: events reach subscribers in timed batches; slow clients drop, never block."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from router.telemetry import DecisionEvent, SubscriptionClosedError
from router.telemetry.bus import EventBus


def make(i: int) -> DecisionEvent:
    return DecisionEvent(
        ts=time.time(), request_id=f"r{i}", tenant="t", model="auto", route="edge", reason="x"
    )


async def test_a_burst_arrives_as_one_batch_in_order() -> None:
    bus = EventBus(interval_s=0.2)
    sub = bus.subscribe()
    for i in range(100):
        bus.publish(make(i))
    batch = await sub.get(timeout=5)
    assert batch is not None
    assert [e.request_id for e in batch] == [f"r{i}" for i in range(100)]
    assert await sub.get(timeout=0.3) is None
    await bus.aclose()


async def test_every_subscriber_gets_every_batch() -> None:
    bus = EventBus(interval_s=0.05)
    a, b = bus.subscribe(), bus.subscribe()
    bus.publish(make(1))
    got_a, got_b = await a.get(5), await b.get(5)
    assert got_a is not None and got_b is not None
    assert [e.request_id for e in got_a] == [e.request_id for e in got_b] == ["r1"]
    await bus.aclose()


async def test_publishing_without_subscribers_keeps_nothing() -> None:
    bus = EventBus(interval_s=0.05)
    bus.publish(make(1))
    assert bus.flush() == 0
    sub = bus.subscribe()
    bus.publish(make(2))
    batch = await sub.get(5)
    assert batch is not None and [e.request_id for e in batch] == ["r2"]
    await bus.aclose()


async def test_the_flusher_stops_with_the_last_subscriber() -> None:
    bus = EventBus(interval_s=0.02)
    sub = bus.subscribe()
    assert bus._task is not None and not bus._task.done()
    bus.unsubscribe(sub)
    assert bus.subscribers == 0
    await asyncio.wait_for(bus._task, 2)
    await bus.aclose()


async def test_a_slow_subscriber_loses_its_oldest_batches() -> None:
    bus = EventBus(interval_s=3600, queue_batches=2)  # flushed by hand below
    sub = bus.subscribe()
    for i in range(3):
        bus.publish(make(i))
        assert bus.flush() == 1
    assert sub.dropped == 1 and bus.dropped == 1
    first, second = await sub.get(1), await sub.get(1)
    assert [e.request_id for e in first or []] == ["r1"]
    assert [e.request_id for e in second or []] == ["r2"]
    bus.unsubscribe(sub)
    assert bus.dropped == 1
    await bus.aclose()


async def test_close_ends_subscriptions() -> None:
    bus = EventBus(interval_s=0.05)
    sub = bus.subscribe()
    bus.publish(make(1))
    received: list[list[DecisionEvent]] = []

    async def consume() -> None:
        with contextlib.suppress(SubscriptionClosedError):
            while True:
                if batch := await sub.get():
                    received.append(batch)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    await bus.aclose()
    await asyncio.wait_for(task, 2)
    assert [[e.request_id for e in b] for b in received] == [["r1"]]
    with pytest.raises(SubscriptionClosedError):
        await sub.get(1)
    with pytest.raises(SubscriptionClosedError):
        await bus.subscribe().get(1)


async def test_publish_from_another_thread() -> None:
    bus = EventBus(interval_s=0.05)
    sub = bus.subscribe()
    await asyncio.gather(*(asyncio.to_thread(bus.publish, make(i)) for i in range(20)))
    seen: set[str] = set()
    while len(seen) < 20:
        batch = await sub.get(5)
        assert batch is not None
        seen.update(e.request_id for e in batch)
    assert seen == {f"r{i}" for i in range(20)}
    await bus.aclose()
