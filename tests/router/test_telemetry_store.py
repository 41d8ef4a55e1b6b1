"""The decision log: migrations, WAL, batched writes from a thread, reading back, retention."""

from __future__ import annotations

import time
from pathlib import Path

import pysqlite3 as sqlite3
import pytest
import sqlite_utils

from router.telemetry import DecisionEvent, read_decisions
from router.telemetry.errors import TelemetryError
from router.telemetry.store import MIGRATIONS, DecisionStore, connect, find_decision


def make(i: int, **fields: object) -> DecisionEvent:
    base: dict[str, object] = dict(
        ts=time.time(),
        request_id=f"r{i}",
        tenant="t",
        model="auto",
        route="edge",
        reason="short",
        prompt_tokens=i,
        latency_ms=float(i),
    )
    base.update(fields)
    return DecisionEvent(**base)  # type: ignore[arg-type]


def test_migrations_apply_once_in_order(tmp_path: Path) -> None:
    db = connect(tmp_path / "t.db")
    names = [m.name for m in MIGRATIONS.applied(db)]
    assert names == ["0001_decisions", "0002_cache_outcome", "0003_drop_old_runner_table"]
    assert MIGRATIONS.pending(db) == []
    MIGRATIONS.apply(db)  # again: nothing runs twice
    assert [m.name for m in MIGRATIONS.applied(db)] == names
    assert db.journal_mode == "wal"
    assert {"cache", "cache_refusal", "features", "prompt_preview"} <= set(db["decisions"].columns_dict)
    db.conn.close()


def test_a_log_of_the_old_runner_is_upgraded_in_place(tmp_path: Path) -> None:
    # As the node's own runner left it after its first migration: its table of names, the
    # decisions table without the cache columns, a row.
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(sqlite3.connect(str(path)))
    db["_migrations"].create({"name": str, "applied_at": float}, pk="name")
    db["_migrations"].insert({"name": "0001_decisions", "applied_at": 0.0})
    MIGRATIONS.apply(db, stop_before="0002_cache_outcome")
    db.execute("DELETE FROM _sqlite_migrations")  # the old runner never wrote sqlite-utils' record
    old_row = {k: v for k, v in make(1).to_row().items() if k not in ("cache", "cache_refusal")}
    db["decisions"].insert(old_row)
    db.conn.close()
    assert [e.request_id for e in read_decisions(path)] == ["r1"]  # readable before the upgrade
    db = connect(path)
    assert "cache_refusal" in db["decisions"].columns_dict and not db["_migrations"].exists()
    assert len(MIGRATIONS.applied(db)) == 3
    db.conn.close()
    assert [(e.request_id, e.cache) for e in read_decisions(path)] == [("r1", None)]


async def test_writes_are_batched_and_read_back_in_order(tmp_path: Path) -> None:
    store = DecisionStore(tmp_path / "t.db", write_interval_s=5.0, write_batch=1000)
    for i in range(250):
        store.put(make(i, private=(i == 3), prompt_preview="secret" if i == 3 else f"p{i}"))
    await store.flush()
    assert store.written == 250 and store.dropped == 0
    events = read_decisions(tmp_path / "t.db")
    assert [e.request_id for e in events] == [f"r{i}" for i in range(250)]
    assert events[3].prompt_preview == "" and events[4].prompt_preview == "p4"
    assert [e.request_id for e in read_decisions(tmp_path / "t.db", limit=3)] == ["r247", "r248", "r249"]
    assert find_decision(tmp_path / "t.db", "r42") == events[42]
    assert find_decision(tmp_path / "t.db", "nope") is None
    await store.aclose()


async def test_close_writes_what_is_queued(tmp_path: Path) -> None:
    store = DecisionStore(tmp_path / "t.db", write_interval_s=30.0)
    for i in range(10):
        store.put(make(i))
    await store.aclose()
    assert len(read_decisions(tmp_path / "t.db")) == 10
    store.put(make(99))  # after close: counted, not raised
    assert store.dropped == 1


async def test_writer_groups_rows_per_transaction(tmp_path: Path) -> None:
    store = DecisionStore(tmp_path / "t.db", write_interval_s=0.2, write_batch=100)
    commits: list[int] = []
    original = store._write

    def counting(events: list[DecisionEvent]) -> None:
        if events:
            commits.append(len(events))
        original(events)

    store._write = counting  # type: ignore[method-assign]
    for i in range(300):
        store.put(make(i))
    await store.flush()
    assert sum(commits) == 300
    assert max(commits) == 100 and len(commits) <= 4
    await store.aclose()


async def test_a_failed_write_is_counted_not_raised(tmp_path: Path) -> None:
    store = DecisionStore(tmp_path / "t.db", write_interval_s=0.05)
    store.db.execute("DROP TABLE decisions")
    store.put(make(1))
    await store.flush()
    assert (store.written, store.dropped) == (0, 1)
    await store.aclose()


async def test_retention_and_row_cap(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = DecisionStore(path, write_interval_s=0.05)
    now = time.time()
    for i in range(5):
        store.put(make(i, ts=now - 40 * 86400))
    for i in range(5, 12):
        store.put(make(i, ts=now))
    await store.aclose()
    store = DecisionStore(path, retention_s=30 * 86400, max_rows=4)
    await store.aclose()
    assert [e.request_id for e in read_decisions(path)] == ["r8", "r9", "r10", "r11"]


def test_reading_a_missing_log_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TelemetryError) as info:
        read_decisions(tmp_path / "absent.db")
    assert info.value.code == "telemetry_not_found"
    assert not (tmp_path / "absent.db").exists()


def test_unopenable_log_is_a_telemetry_error(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(TelemetryError) as info:
        connect(tmp_path / "dir.db")
    assert info.value.code == "telemetry_unavailable"
