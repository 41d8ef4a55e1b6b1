"""The SSE stream on a real loopback server: feed rows and counters arrive without a reload."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse

from dashboard.live import parse_topics
from dashfakes import FakeCache, FakeEdge, FakeMember, FakeNode, FakePool, event, fake_app, make_telemetry
from loadtest.servers import serve_app


@pytest.fixture
def live_node(tmp_path: Path) -> FakeNode:
    telemetry = make_telemetry(
        tmp_path / "data", bus_interval_ms=100, dashboard={"stats_interval_s": 0.3, "tick_s": 0.5}
    )
    pool = FakePool(
        [FakeMember("gpu-a", "http://127.0.0.1:9001/v1"), FakeMember("gpu-b", "http://127.0.0.1:9002/v1")]
    )
    return FakeNode(telemetry, FakeEdge(), pool, FakeCache([]))


@pytest.fixture
def base_url(live_node: FakeNode) -> Iterator[str]:
    with serve_app(fake_app(live_node), ready_path=None) as url:
        yield url


def wait_for(events: Iterator[ServerSentEvent], name: str, pattern: str, timeout: float) -> tuple[str, float]:
    """The first event ``name`` whose data matches ``pattern``, and when it came."""
    deadline = time.monotonic() + timeout
    for sse in events:
        if sse.event == name and re.search(pattern, sse.data):
            return sse.data, time.monotonic()
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"no {name!r} event matching {pattern!r} within {timeout} s")


def wait_subscribed(node: FakeNode, timeout: float = 10.0) -> None:
    assert node.telemetry is not None
    deadline = time.monotonic() + timeout
    while node.telemetry.bus.subscribers < 1:
        assert time.monotonic() < deadline, "the SSE handler never subscribed"
        time.sleep(0.02)


def test_topics_parse() -> None:
    assert parse_topics("feed, stats") == {"feed", "stats"}
    assert parse_topics("bogus") == {"feed", "stats", "pool", "cache"}
    assert parse_topics("") == {"feed", "stats", "pool", "cache"}


def test_feed_and_counters_arrive_within_two_seconds(base_url: str, live_node: FakeNode) -> None:
    assert live_node.telemetry is not None
    with (
        httpx.Client(timeout=httpx.Timeout(10.0)) as client,
        connect_sse(client, "GET", f"{base_url}/dashboard/events?topics=feed,stats") as source,
    ):
        assert source.response.headers["content-type"].startswith("text/event-stream")
        events = source.iter_sse()
        wait_subscribed(live_node)
        sent = time.monotonic()
        live_node.telemetry.record(
            event("live-1", route="cloud", reason="complex", prompt_preview="<script>x()</script>")
        )
        rows, rows_at = wait_for(events, "feed", r'id="req-live-1"', timeout=10)
        stats, stats_at = wait_for(events, "stats", r'id="stat-total">1<', timeout=10)
    assert "&lt;script&gt;x()&lt;/script&gt;" in rows and "<script>" not in rows
    assert 'id="split-cloud">1<' in stats
    # Generous for a loaded 2-core machine; the bus batches every 100 ms here, stats every 0.3 s.
    assert rows_at - sent < 2.0 and stats_at - sent < 2.0


def test_a_burst_arrives_batched_newest_first(base_url: str, live_node: FakeNode) -> None:
    assert live_node.telemetry is not None
    with (
        httpx.Client(timeout=httpx.Timeout(10.0)) as client,
        connect_sse(client, "GET", f"{base_url}/dashboard/events?topics=feed") as source,
    ):
        events = source.iter_sse()
        wait_subscribed(live_node)
        for i in range(50):
            live_node.telemetry.record(event(f"b{i}"))
        seen: list[str] = []
        deadline = time.monotonic() + 10
        feeds = 0
        for sse in events:
            if sse.event == "feed":
                feeds += 1
                ids = re.findall(r'id="req-(b\d+)"', sse.data)
                assert ids == sorted(ids, key=lambda s: -int(s[1:]))  # newest first within a batch
                seen.extend(ids)
            if len(seen) >= 50 or time.monotonic() > deadline:
                break
    assert sorted(seen, key=lambda s: int(s[1:])) == [f"b{i}" for i in range(50)]
    assert feeds < 50  # batched, not one SSE message per request


def test_pool_panel_follows_member_health(base_url: str, live_node: FakeNode) -> None:
    assert live_node.pool is not None
    with (
        httpx.Client(timeout=httpx.Timeout(10.0)) as client,
        connect_sse(client, "GET", f"{base_url}/dashboard/events?topics=pool") as source,
    ):
        events = source.iter_sse()
        wait_for(events, "pool", r'data-member="gpu-b">', timeout=10)
        live_node.pool.kill("gpu-b")
        data, _ = wait_for(events, "pool", r'<tr class="member down" data-member="gpu-b">', timeout=10)
    assert "1 of 2 members healthy." in data


def test_a_client_leaving_unsubscribes(base_url: str, live_node: FakeNode) -> None:
    assert live_node.telemetry is not None
    with (
        httpx.Client(timeout=httpx.Timeout(10.0)) as client,
        connect_sse(client, "GET", f"{base_url}/dashboard/events?topics=feed,stats"),
    ):
        wait_subscribed(live_node)
    deadline = time.monotonic() + 10
    while live_node.telemetry.bus.subscribers:
        assert time.monotonic() < deadline, "the stream kept its subscription after the client left"
        time.sleep(0.05)
