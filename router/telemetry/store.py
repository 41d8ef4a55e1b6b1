"""The decision log: ``decisions`` in ``<data_dir>/telemetry.db``, written in batches by one thread."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any, Final

import pysqlite3 as sqlite3
import sqlite_utils
from sqlite_utils.migrations import Migrations

from models.files import private_file

from .errors import TelemetryError
from .events import DecisionEvent

log = logging.getLogger(__name__)

_PRUNE_EVERY_S: Final = 60.0


# Named and ordered, each applied once (sqlite-utils records them, as the cache's and the
# stored responses' are); append, never reorder.
MIGRATIONS = Migrations("edgeroute.telemetry")


@MIGRATIONS(name="0001_decisions")
def _m0001_decisions(db: sqlite_utils.Database) -> None:
    db["decisions"].create(
        {
            "id": int,
            "ts": float,
            "request_id": str,
            "tenant": str,
            "model": str,
            "route": str,
            "reason": str,
            "fallback": str,
            "degraded": str,
            "status": str,
            "error": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "latency_ms": float,
            "ttft_ms": float,
            "similarity": float,
            "complexity": float,
            "member": str,
            "stream": int,
            "private": int,
            "prompt_preview": str,
            "features": str,
        },
        pk="id",
        not_null={"ts", "request_id", "tenant", "model", "route", "reason", "status"},
        if_not_exists=True,
    )
    db["decisions"].create_index(["ts"], if_not_exists=True)
    db["decisions"].create_index(["request_id"], if_not_exists=True)


@MIGRATIONS(name="0002_cache_outcome")
def _m0002_cache_outcome(db: sqlite_utils.Database) -> None:
    columns = db["decisions"].columns_dict
    if "cache" not in columns:
        db["decisions"].add_column("cache", str)
    if "cache_refusal" not in columns:
        db["decisions"].add_column("cache_refusal", str)


@MIGRATIONS(name="0003_drop_old_runner_table")
def _m0003_drop_old_runner_table(db: sqlite_utils.Database) -> None:
    # Before sqlite-utils' Migrations recorded them, a runner of our own kept the names here; the
    # first two steps are idempotent, so an old log simply runs them again.
    if db["_migrations"].exists():
        db["_migrations"].drop()


def connect(path: Path) -> sqlite_utils.Database:
    """Open (creating if needed) and migrate the log; WAL so readers never block the writer."""
    try:
        private_file(path, sqlite=True)  # prompts and tenants: the operator's eyes only
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=5.0)
        db = sqlite_utils.Database(conn)
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")
        MIGRATIONS.apply(db)
    except (sqlite3.Error, OSError) as exc:
        raise TelemetryError(
            f"cannot open the telemetry log {path}: {exc}", code="telemetry_unavailable"
        ) from exc
    return db


def _query(path: Path, sql: str, params: tuple[Any, ...]) -> list[DecisionEvent]:
    if not path.is_file():
        raise TelemetryError(f"no telemetry log at {path}", code="telemetry_not_found")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return [DecisionEvent.from_row(row) for row in sqlite_utils.Database(conn).query(sql, params)]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise TelemetryError(
            f"cannot read the telemetry log {path}: {exc}", code="telemetry_unavailable"
        ) from exc


def read_decisions(db_path: Path | str, limit: int | None = None) -> list[DecisionEvent]:
    """The logged decisions, oldest first; with ``limit``, only the most recent ``limit`` of them."""
    path = Path(db_path)
    if limit is None:
        return _query(path, "SELECT * FROM decisions ORDER BY id", ())
    inner = "SELECT * FROM decisions ORDER BY id DESC LIMIT ?"
    return _query(path, f"SELECT * FROM ({inner}) ORDER BY id", (int(limit),))


def find_decision(db_path: Path | str, request_id: str) -> DecisionEvent | None:
    """The most recent logged decision of one request, or None."""
    found = _query(
        Path(db_path), "SELECT * FROM decisions WHERE request_id = ? ORDER BY id DESC LIMIT 1", (request_id,)
    )
    return found[0] if found else None


_STOP: Final = object()


class DecisionStore:
    """Queues decisions and writes them from one thread, many rows per transaction.

    ``put`` never blocks and never raises: the request path must not wait on the disk. A write
    that fails is logged and its rows are counted in ``dropped``.

    On an event loop, ``put`` only appends to a list the loop hands to the writer once per
    ``write_interval_s``: waking the writer thread on every request costs the request path a
    GIL hand-over (about half a millisecond each, measured).
    """

    def __init__(
        self,
        path: Path,
        *,
        write_interval_s: float = 0.5,
        write_batch: int = 500,
        retention_s: float = 30 * 86400,
        max_rows: int = 1_000_000,
    ) -> None:
        self.path = path
        self.db = connect(path)
        self._interval = write_interval_s
        self._batch = write_batch
        self._retention_s = retention_s
        self._max_rows = max_rows
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._columns = [c for c in self.db["decisions"].columns_dict if c != "id"]
        self.written = 0
        self.dropped = 0
        self._last_prune = 0.0
        self._closed = False
        self._held: list[DecisionEvent] = []  # put on the loop, not yet handed to the writer
        self._hand_over: asyncio.TimerHandle | None = None
        self._prune()
        self._thread = threading.Thread(target=self._run, name="telemetry-writer", daemon=True)
        self._thread.start()

    def put(self, event: DecisionEvent) -> None:
        if self._closed:
            self.dropped += 1
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script, a test): straight to the writer
            self._queue.put([event])
            return
        self._held.append(event)
        if self._hand_over is None:
            self._hand_over = loop.call_later(self._interval, self._release)

    def _release(self) -> None:
        """Hand what the loop holds to the writer thread, in one wake-up."""
        if self._hand_over is not None:
            self._hand_over.cancel()
            self._hand_over = None
        if self._held:
            held, self._held = self._held, []
            self._queue.put(held)

    async def flush(self) -> None:
        """Wait until every decision put before this call is written."""
        if self._closed:
            return
        self._release()
        marker = threading.Event()  # set once everything queued before it is written
        self._queue.put(marker)
        await asyncio.to_thread(marker.wait)

    async def aclose(self) -> None:
        """Write what is queued, stop the writer thread, close the database."""
        if self._closed:
            return
        self._closed = True
        self._release()
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self.db.conn.close()

    def _run(self) -> None:
        stopping = False
        while True:
            try:
                # Once stopped, what was queued behind the stop marker (put raced with close) is
                # still written; then the thread ends.
                item = self._queue.get(block=not stopping)
            except queue.Empty:
                return
            pending: list[DecisionEvent] = []
            deadline = time.monotonic() + (0.0 if stopping else self._interval)
            # Gather until the interval is over, a full batch is in, or a marker (flush, stop) comes.
            while isinstance(item, list):
                pending.extend(item)
                remaining = deadline - time.monotonic()
                if len(pending) >= self._batch or remaining <= 0:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            for start in range(0, len(pending), self._batch):  # at most write_batch rows a transaction
                self._write(pending[start : start + self._batch])
            if isinstance(item, threading.Event):
                item.set()
            elif item is _STOP:
                stopping = True

    def _write(self, events: list[DecisionEvent]) -> None:
        if not events:
            return
        rows = [event.to_row() for event in events]
        placeholders = ", ".join("?" for _ in self._columns)
        sql = f"INSERT INTO decisions ({', '.join(self._columns)}) VALUES ({placeholders})"
        try:
            with self.db.atomic():
                self.db.conn.executemany(sql, [tuple(r.get(c) for c in self._columns) for r in rows])
            self.written += len(rows)
        except sqlite3.Error:
            self.dropped += len(rows)
            log.exception("telemetry: %d decisions could not be written to %s", len(rows), self.path)
        if time.monotonic() - self._last_prune > _PRUNE_EVERY_S:
            self._prune()

    def _prune(self) -> None:
        """Keep the log within its retention age and row cap."""
        self._last_prune = time.monotonic()
        try:
            with self.db.atomic():
                self.db.execute("DELETE FROM decisions WHERE ts < ?", [time.time() - self._retention_s])
                self.db.execute(
                    "DELETE FROM decisions WHERE id <= (SELECT max(id) FROM decisions) - ?", [self._max_rows]
                )
        except sqlite3.Error:
            log.exception("telemetry: pruning %s failed", self.path)
