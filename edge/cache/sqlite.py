"""Opening the cache file: sqlite-vec loaded, WAL and the durability pragmas; SQLite errors translated."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pysqlite3 as sqlite3
import sqlite_vec

from models.files import private_file

from ..errors import CacheError


def connect(path: Path) -> sqlite3.Connection:
    """A connection with sqlite-vec loaded and the durability pragmas set."""
    try:
        private_file(path, sqlite=True)  # prompts and answers: the operator's eyes only
        conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False)
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise CacheError(f"{path}: SQLite refused WAL mode (got {mode!r})")
        # FULL: the WAL is fsynced at every commit, so a committed store survives power loss too.
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA cache_size=-65536")
        conn.execute("PRAGMA temp_store=MEMORY")
    except sqlite3.Error as exc:
        raise CacheError(f"cannot open the cache file {path}: {exc}") from exc
    return conn


@contextlib.contextmanager
def _translate(what: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise CacheError(f"cache {what} failed: {exc}") from exc
