"""Telemetry: one record() reaches the log, the live bus, the rolling numbers and /metrics."""

from __future__ import annotations

import time
from pathlib import Path

from router.telemetry import DecisionEvent, Telemetry, TelemetrySettings, read_decisions


def make(i: int, **fields: object) -> DecisionEvent:
    base: dict[str, object] = dict(
        ts=time.time(),
        request_id=f"r{i}",
        tenant="t",
        model="auto",
        route="edge",
        reason="short",
        latency_ms=10.0,
    )
    base.update(fields)
    return DecisionEvent(**base)  # type: ignore[arg-type]


async def test_record_goes_everywhere(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetrySettings(bus_interval_ms=50), tmp_path)
    assert telemetry.db_path == tmp_path / "telemetry.db"
    sub = telemetry.bus.subscribe()
    for i in range(5):
        telemetry.record(make(i, route="cloud" if i % 2 else "edge"))
    batch = await sub.get(5)
    assert batch is not None and [e.request_id for e in batch] == ["r0", "r1", "r2", "r3", "r4"]
    assert telemetry.snapshot().split == {"edge": 3, "cloud": 2}
    assert [e.request_id for e in telemetry.recent(2)] == ["r4", "r3"]
    assert telemetry.store is not None
    await telemetry.store.flush()
    assert [e.request_id for e in read_decisions(telemetry.db_path)] == [f"r{i}" for i in range(5)]
    assert (
        b'edgeroute_requests_total{reason="short",route="edge",status="ok"} 3.0' in telemetry.metrics.render()
    )
    telemetry.bus.unsubscribe(sub)
    await telemetry.aclose()


async def test_find_falls_back_to_the_log(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetrySettings(recent=10), tmp_path)
    for i in range(30):
        telemetry.record(make(i))
    assert (await telemetry.find("r29")) is telemetry.recent(1)[0]
    old = await telemetry.find("r3")  # no longer in memory: read from SQLite
    assert old is not None and old.request_id == "r3"
    assert await telemetry.find("missing") is None
    await telemetry.aclose()


async def test_disabled_log_keeps_live_numbers(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetrySettings(enabled=False), tmp_path)
    telemetry.record(make(1))
    assert telemetry.snapshot().total == 1
    assert not (tmp_path / "telemetry.db").exists()
    assert await telemetry.find("r1") is not None
    assert await telemetry.find("r2") is None
    await telemetry.aclose()


async def test_settings_from_environment(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from router.settings import load_settings

    monkeypatch.setenv("EDGEROUTE_TELEMETRY__PRICES__CLOUD_PROMPT_PER_1K", "0.01")
    monkeypatch.setenv("EDGEROUTE_TELEMETRY__DASHBOARD__PATH", "/ops")
    settings = load_settings()
    assert settings.telemetry.prices.cloud_prompt_per_1k == 0.01
    assert settings.telemetry.dashboard.path == "/ops"
    assert settings.telemetry.bus_interval_ms == 250


async def test_snapshot_may_be_shared_for_a_while(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetrySettings(enabled=False), tmp_path)
    first = telemetry.snapshot(max_age_s=60)
    telemetry.record(make(1))
    assert telemetry.snapshot(max_age_s=60) is first  # reused: within its age
    fresh = telemetry.snapshot()
    assert fresh is not first and fresh.total == 1
    assert telemetry.snapshot(max_age_s=60) is fresh
    await telemetry.aclose()
