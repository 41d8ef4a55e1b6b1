"""GcWatch: the start-up heap frozen out of collections, every collection's pause observed."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest

from router.telemetry import GcWatch, Telemetry, TelemetrySettings


class _Marker:
    """A tracked object the test can look for among the collector's generations."""


@pytest.fixture(autouse=True)
def _unfrozen() -> None:
    gc.unfreeze()  # each test starts from an unfrozen heap, whatever ran before in this process


def _in_generation_2(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects(generation=2))


def test_freeze_moves_the_heap_out_of_collections_and_close_puts_it_back() -> None:
    marker = _Marker()
    gc.collect()
    assert _in_generation_2(marker)
    watch = GcWatch(lambda generation, seconds: None)
    watch.start(freeze=True)
    try:
        assert gc.get_freeze_count() > 0
        assert not _in_generation_2(marker)  # a full collection no longer walks it
    finally:
        watch.close()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert _in_generation_2(marker)


def test_every_collection_is_observed_with_its_generation_until_closed() -> None:
    seen: list[tuple[int, float]] = []
    with GcWatch(lambda generation, seconds: seen.append((generation, seconds))) as watch:
        watch.start(freeze=False)
        assert gc.get_freeze_count() == 0
        gc.collect(1)
        gc.collect(2)
        assert [g for g, _ in seen[-2:]] == [1, 2]
        assert all(s >= 0.0 for _, s in seen)
    count = len(seen)
    gc.collect()
    assert len(seen) == count


def test_a_watch_that_never_started_closes_cleanly() -> None:
    GcWatch(lambda generation, seconds: None).close()
    assert gc.get_freeze_count() == 0


async def test_pauses_reach_metrics(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetrySettings(), tmp_path)
    gc.disable()  # only the two collections below, none the allocator triggers between them
    watch = telemetry.watch_gc(freeze=True)
    try:
        gc.collect(2)
        gc.collect(2)
    finally:
        watch.close()
        gc.enable()
        await telemetry.aclose()
    text = telemetry.metrics.render().decode()
    count = re.search(r'edgeroute_gc_pause_seconds_count\{generation="2"\} (\d+)\.0', text)
    # The freeze's own collection happens before the callback is installed: exactly the two above.
    assert count is not None and int(count.group(1)) == 2
    assert gc.get_freeze_count() == 0
