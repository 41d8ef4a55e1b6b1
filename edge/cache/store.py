"""The cache file: one SQLite database (WAL, synchronous=FULL) holding entries and their vectors.

Every method is synchronous and uses one of two connections: ``read`` (lookups, stats, export)
and ``write`` (everything that changes the file). The async cache gives each its own thread;
WAL lets lookups run while a write commits. A write returns only after its transaction commits
with a full fsync, so an acknowledged store survives ``kill -9`` and power loss.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pysqlite3 as sqlite3
import sqlite_utils

from ..errors import CacheError
from .index import DIM, IvfIndex
from .migrations import connect, migrate, records, translate
from .results import Entry, NewEntry

SERVED_KEEP = 200_000  # answers remembered for a rating, at most (rated ones are kept)
# One answer as served, with the cache's decision, in the column order of _SERVED_COLS.
ServedRow = tuple[Any, ...]
_SERVED_COLS = "response_id, tenant, route, created, entry_id, similarity, probability, query, threshold, embedding"
_ENTRY_COLS = ", ".join(f.name for f in fields(Entry))  # in Entry's order: Entry(*row)


def _scope_id(scope: str) -> int:
    """The scope (a hex digest) as a signed 64-bit integer: a metadata column of the vector table."""
    return int.from_bytes(bytes.fromhex(scope[:16]), "big", signed=True)


class CacheStore:
    """Entries, binary codes and counters in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.write = connect(self.path)
        try:
            migrate(sqlite_utils.Database(self.write))
            self.read = connect(self.path)
            # The read connection serves the cache's reader thread and callers of stats(); one at a time.
            self._read_lock = threading.Lock()
            # Exact lookups get their own connection: a point read by a unique key costs less
            # than handing it to the reader thread, and must not wait behind a vector search.
            self.point = connect(self.path)
            self._point_lock = threading.Lock()
            meta = dict(self.read.execute("SELECT key, value FROM meta").fetchall())
            vectors = {k: np.frombuffer(meta[k], dtype=np.float32) for k in ("ivf_centroids", "ivf_mean")}
            self.index = IvfIndex.from_arrays(vectors["ivf_centroids"].reshape(-1, DIM), vectors["ivf_mean"])
            self.count = self._count()
        except (sqlite3.Error, KeyError) as exc:
            self.close()
            raise CacheError(f"cannot prepare the cache file {self.path}: {exc}") from exc

    # -- reads -----------------------------------------------------------------------------

    def get_exact(self, exact_key: str, min_created: float) -> Entry | None:
        with translate("exact lookup"), self._point_lock:
            row = self.point.execute(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE exact_key = ? AND created >= ?", (exact_key, min_created)
            ).fetchone()
        return Entry(*row) if row else None

    def stored_embedding(self, entry_id: int) -> np.ndarray | None:
        """The embedding an entry was stored with (None for one too long for the semantic layer)."""
        with translate("embedding read"), self._point_lock:
            row = self.point.execute("SELECT embedding FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None or row[0] is None:
            return None
        return np.frombuffer(row[0], dtype=np.float32).copy()

    def search(
        self,
        tenant: str,
        scope: str,
        vec: np.ndarray,
        *,
        nprobe: int,
        probe_k: int,
        min_created: float,
    ) -> list[tuple[Entry, np.ndarray, float]]:
        """Nearest entries of ``tenant`` with this exact ``scope``: (entry, embedding, cosine), best first."""
        probes = self.index.probes(vec, nprobe)
        code = self.index.codes(vec)[0].tobytes()
        # SQLite runs a virtual-table scan once per IN value: k nearest codes from each probed
        # bucket. Buckets are bound parameters, so the statement is prepared once and reused.
        sql = (
            "SELECT rowid FROM cache_vec WHERE code MATCH vec_bit(?) AND k = ? AND tenant = ? AND scope = ?"
            f" AND bucket IN ({','.join('?' * len(probes))})"
        )
        with translate("vector search"), self._read_lock:
            ids = [r[0] for r in self.read.execute(sql, (code, probe_k, tenant, _scope_id(scope), *probes)).fetchall()]
            if not ids:
                return []
            # Padded to a fixed length (rowid -1 never exists): one prepared statement for all lookups.
            ids += [-1] * (len(probes) * probe_k - len(ids))
            marks = ",".join("?" * len(ids))
            # The partition key already isolates tenants; the re-check costs nothing and keeps
            # a hash collision of scopes or a stray code row from ever crossing a tenant.
            rows = self.read.execute(
                f"SELECT {_ENTRY_COLS}, embedding FROM entries WHERE id IN ({marks})"
                " AND tenant = ? AND scope = ? AND created >= ?"
                " AND embedding IS NOT NULL",
                (*ids, tenant, scope, min_created),
            ).fetchall()
        embs = np.frombuffer(b"".join(r[-1] for r in rows), dtype=np.float32).reshape(len(rows), DIM)
        sims = embs @ vec
        order = np.argsort(-sims)
        return [(Entry(*rows[i][:-1]), embs[i], float(sims[i])) for i in order]

    def stats(self) -> dict[str, Any]:
        with translate("stats"), self._read_lock:
            total = self.read.execute("SELECT count(*), coalesce(sum(hits), 0) FROM entries").fetchone()
            tiers = dict(self.read.execute("SELECT tier, count(*) FROM entries GROUP BY tier").fetchall())
            tenants = self.read.execute("SELECT count(DISTINCT tenant) FROM entries").fetchone()[0]
            counters = dict(self.read.execute("SELECT name, value FROM counters").fetchall())
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return {
            "path": str(self.path),
            "entries": total[0],
            "hits_recorded": total[1],
            "tenants": tenants,
            "by_tier": tiers,
            "counters": counters,
            "file_bytes": size,
        }

    def export(self, tenant: str | None = None) -> Iterator[dict[str, Any]]:
        where, args = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
        conn = connect(self.path)  # its own connection: a long export never holds the reader
        with translate("export"), contextlib.closing(conn):
            cur = conn.execute(
                "SELECT id, tenant, model, prompt_text, request, answer, finish_reason, stop_word, prompt_tokens,"
                f" completion_tokens, tier, created, last_used, hits FROM entries {where} ORDER BY id",
                args,
            )
            names = [d[0] for d in cur.description]
            for row in cur:
                record = dict(zip(names, row, strict=True))
                record["request"] = json.loads(record["request"] or "{}")
                yield record

    # -- writes ----------------------------------------------------------------------------

    def put(
        self,
        entries: Iterable[NewEntry],
        *,
        now: float,
        max_entries: int,
        min_created: float | None = None,
        touches: dict[int, tuple[float, int]] | None = None,
        counters: dict[str, int] | None = None,
        served: list[ServedRow] | None = None,
    ) -> dict[str, Any]:
        """Insert or replace entries, flush what is pending, expire and evict; one commit."""
        with self.transaction("store"):
            stored = self._insert(list(entries), now)
            self.flush(touches, counters, served)
            expired = self._expire(min_created) if min_created is not None else 0
            evicted = self._evict(max_entries)
        return {"ids": stored, "expired": expired, "evicted": evicted}

    def put_bulk(self, rows: Sequence[NewEntry], embeddings: np.ndarray, *, now: float) -> int:
        """Fast path for warm-up and benchmarks: many new entries, vectors precomputed, one commit
        (no expiry or eviction)."""
        embs = np.ascontiguousarray(embeddings, dtype=np.float32)
        with self.transaction("bulk store"):
            return len(self._insert([replace(r, embedding=embs[i]) for i, r in enumerate(rows)], now))

    def flush(
        self,
        touches: dict[int, tuple[float, int]] | None,
        counters: dict[str, int] | None,
        served: list[ServedRow] | None = None,
    ) -> None:
        """Persist recency of hits (for LRU), counters and served answers, in the caller's transaction if any."""
        if not touches and not counters and not served:
            return
        with self.transaction("flush"):
            if served:
                self.write.executemany(f"INSERT INTO served ({_SERVED_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)", served)
                # Unrated answers beyond the newest SERVED_KEEP go (the TTL may be off): a bound on the file.
                self.write.execute(
                    "DELETE FROM served WHERE rating IS NULL AND id <= (SELECT max(id) FROM served) - ?", (SERVED_KEEP,)
                )
            if touches:
                self.write.executemany(
                    "UPDATE entries SET last_used = max(last_used, ?), hits = hits + ? WHERE id = ?",
                    [(ts, n, i) for i, (ts, n) in touches.items()],
                )
            if counters:
                self.write.executemany(
                    "INSERT INTO counters (name, value) VALUES (?, ?)"
                    " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                    list(counters.items()),
                )

    @contextlib.contextmanager
    def reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """The read connection, held for a few reads (dashboard, metrics)."""
        with translate(what), self._read_lock:
            yield self.read

    def clear(self, tenant: str | None = None) -> int:
        where, args = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
        with self.transaction("clear"):
            ids = [r[0] for r in self.write.execute(f"SELECT id FROM entries {where}", args)]
            self.delete_ids(ids)
            if tenant is None:
                self.write.execute("DELETE FROM counters")
        self.count = self._count()
        return len(ids)

    def entries_per_tenant(self) -> dict[str, int]:
        sql = "SELECT tenant, count(*) FROM entries GROUP BY tenant ORDER BY tenant"
        with self.reading("entries per tenant") as conn:
            return dict(conn.execute(sql).fetchall())

    def search_text(self, text: str, tenant: str | None, limit: int) -> list[dict[str, Any]]:
        """Entries whose question or answer contains ``text`` (case-insensitive), newest first."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = (
            "SELECT id, tenant, model, prompt_text AS prompt, answer AS text, tier, hits, created FROM entries"
            " WHERE (prompt_text LIKE ? ESCAPE '\\' OR answer LIKE ? ESCAPE '\\')"
        )
        args: list[Any] = [pattern, pattern]
        if tenant:
            sql += " AND tenant = ?"
            args.append(tenant)
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(int(limit))
        with self.reading("search") as conn:
            return records(conn.execute(sql, args))

    def delete(self, entry_id: int) -> bool:
        with self.transaction("delete"):
            found = self.write.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if found is not None:
                self.delete_ids([entry_id])
        self.count = self._count()
        return found is not None

    def close(self) -> None:
        for conn in (getattr(self, "point", None), getattr(self, "read", None), self.write):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    # -- internals -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, what: str) -> Iterator[None]:
        """One write transaction on the write connection (the writer thread's); inside one, that one.

        IMMEDIATE takes the write lock up front: no SQLITE_BUSY upgrade failure half-way. A failed
        commit is rolled back too, so no later write can join a transaction that never commits."""
        if self.write.in_transaction:  # put's, flushing what is pending with its store
            yield
            return
        with translate(what):
            self.write.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.write.execute("COMMIT")
            except BaseException:
                if self.write.in_transaction:
                    self.write.execute("ROLLBACK")
                self.count = self._count()
                raise

    def _count(self) -> int:
        return int(self.write.execute("SELECT count(*) FROM entries").fetchone()[0])

    def delete_ids(self, ids: Sequence[int]) -> None:
        """Delete entries inside a transaction the caller holds."""
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            self.write.execute(f"DELETE FROM cache_vec WHERE rowid IN ({marks})", part)
            self.write.execute(f"DELETE FROM entries WHERE id IN ({marks})", part)
        self.count = max(0, self.count - len(ids))

    def _insert(self, rows: list[NewEntry], now: float) -> list[int]:
        """Insert ``rows`` (inside a transaction), replacing any entry with the same exact key; rows
        sharing an exact key (texts that normalize alike) are one entry, the last one wins, as if
        they had been stored one after another. Returns the new ids."""
        last = {r.exact_key: i for i, r in enumerate(rows)}
        rows = [rows[i] for i in sorted(last.values())]
        vectors = [i for i, r in enumerate(rows) if r.embedding is not None]
        stacked = np.array([rows[i].embedding for i in vectors], dtype=np.float32).reshape(-1, DIM)
        blobs = {i: v.tobytes() for i, v in zip(vectors, stacked, strict=True)}
        buckets = dict(zip(vectors, self.index.buckets(stacked).tolist(), strict=True))
        c = self.write
        start = c.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0] + 1
        c.execute("CREATE TEMP TABLE IF NOT EXISTS _new_keys (k TEXT PRIMARY KEY)")
        c.execute("DELETE FROM _new_keys")
        c.executemany("INSERT OR IGNORE INTO _new_keys VALUES (?)", [(r.exact_key,) for r in rows])
        old = [r[0] for r in c.execute("SELECT id FROM entries WHERE exact_key IN (SELECT k FROM _new_keys)")]
        self.delete_ids(old)
        c.executemany(
            "INSERT INTO entries (id, tenant, exact_key, scope, model, prompt_text, request, answer,"
            " finish_reason, prompt_tokens, completion_tokens, tier, created, last_used, hits,"
            " embedding, bucket, stop_word) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?)",
            (
                (
                    start + i, r.tenant, r.exact_key, r.scope, r.model, r.prompt_text,
                    json.dumps(r.request, ensure_ascii=False, default=str), r.answer, r.finish_reason,
                    r.prompt_tokens, r.completion_tokens, r.tier, now, now, blobs.get(i), buckets.get(i), r.stop_word,
                )
                for i, r in enumerate(rows)
            ),
        )
        codes = self.index.codes(stacked)
        c.executemany(
            "INSERT INTO cache_vec (rowid, tenant, bucket, code, scope) VALUES (?,?,?,vec_bit(?),?)",
            (
                (start + i, rows[i].tenant, buckets[i], code.tobytes(), _scope_id(rows[i].scope))
                for i, code in zip(vectors, codes, strict=True)
            ),
        )
        self.count += len(rows)
        return [start + i for i in range(len(rows))]

    def _expire(self, min_created: float) -> int:
        # At most 1000 a write: a long-idle file's backlog goes over the next writes, not in one.
        sql = "SELECT id FROM entries WHERE created < ? LIMIT 1000"
        ids = [r[0] for r in self.write.execute(sql, (min_created,))]
        # Unrated answers go with the entries' lifetime; rated ones are the budget's evidence.
        self.write.execute("DELETE FROM served WHERE created < ? AND rating IS NULL", (min_created,))
        self.delete_ids(ids)
        return len(ids)

    def _evict(self, max_entries: int) -> int:
        excess = self.count - max_entries
        if excess <= 0:
            return 0
        sql = "SELECT id FROM entries ORDER BY last_used ASC, id ASC LIMIT ?"
        ids = [r[0] for r in self.write.execute(sql, (excess,))]
        self.delete_ids(ids)
        return len(ids)
