"""The cache file: opening it (sqlite-vec loaded, WAL and the durability pragmas; SQLite errors
translated) and its schema, named migrations applied in order, each recorded once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysqlite3 as sqlite3
import sqlite_utils
import sqlite_vec
from sqlite_utils.migrations import Migrations

from models.files import private_file

from ..errors import CacheError
from .index import CODE_BYTES, IvfIndex


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
def translate(what: str) -> Iterator[None]:
    """SQLite's errors as the cache's, naming what failed."""
    try:
        yield
    except sqlite3.Error as exc:
        raise CacheError(f"cache {what} failed: {exc}") from exc


def records(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """Every row of ``cursor`` as a dict keyed by its column names (``AS`` renames them)."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _entries(db: sqlite_utils.Database) -> None:
    db["entries"].create(
        {
            "id": int,
            "tenant": str,
            "exact_key": str,
            "scope": str,  # hex digest: model, parameters, extra fields, earlier conversation
            "model": str,
            "prompt_text": str,  # the text compared by meaning (last user turn)
            "request": str,  # normalized request, JSON
            "answer": str,
            "finish_reason": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "tier": str,  # who produced the answer: edge | cloud | warmup
            "created": float,
            "last_used": float,
            "hits": int,
            "embedding": bytes,  # float32 x 384, NULL when the semantic layer was off
            "bucket": int,
        },
        pk="id",
        not_null={"tenant", "exact_key", "scope", "model", "answer", "tier", "created", "last_used"},
        defaults={"hits": 0, "prompt_text": "", "finish_reason": "stop", "prompt_tokens": 0, "completion_tokens": 0},
    )
    db["entries"].create_index(["exact_key"], unique=True)
    db["entries"].create_index(["last_used"])
    db["entries"].create_index(["created"])
    db["entries"].create_index(["tenant"])


def _meta(db: sqlite_utils.Database) -> None:
    db["meta"].create({"key": str, "value": bytes}, pk="key")
    db["counters"].create({"name": str, "value": int}, pk="name", not_null={"value"})


def _vectors(db: sqlite_utils.Database) -> None:
    # Partition keys shard the scan: a lookup reads only its tenant's codes in a few buckets.
    db.execute(
        "CREATE VIRTUAL TABLE cache_vec USING vec0("
        " tenant text partition key,"
        " bucket integer partition key,"
        f" code bit[{CODE_BYTES * 8}],"
        " scope integer,"
        " chunk_size=256)"
    )
    centroids, mean = IvfIndex.shipped().blobs()
    # The centroids live in the file: buckets stay consistent even if the shipped ones change.
    db["meta"].insert_all(
        [{"key": "ivf_centroids", "value": centroids}, {"key": "ivf_mean", "value": mean}], replace=True
    )


def _stop_word(db: sqlite_utils.Database) -> None:
    # The stop sequence that ended the answer (NULL: the end-of-sequence token, a length cut, or
    # an entry stored before this column), so a hit reports it as the generation did.
    db["entries"].add_column("stop_word", str)


def _served_feedback(db: sqlite_utils.Database) -> None:
    # Each answer the node returned, with the cache's decision, so a client's or an operator's
    # rating of it (POST /v1/feedback) is stored beside the decision it judges.
    db["served"].create(
        {
            "id": int,
            "response_id": str,  # chatcmpl-..., cmpl-..., resp_...
            "tenant": str,
            "route": str,  # cache-exact, cache-semantic, edge, cloud
            "entry_id": int,  # the entry served (a cache hit), else NULL
            "query": str,  # the text compared by meaning (semantic hits)
            "similarity": float,
            "probability": float,  # the verifier's, on a semantic hit
            "threshold": float,  # the tenant's verifier threshold when it was served
            "embedding": bytes,  # the query's (semantic hits): a wrong rating vetoes its paraphrases
            "created": float,
            "rating": str,  # right | wrong | NULL (not rated)
            "note": str,
            "rated": float,
            "rated_by": str,  # tenant | operator
        },
        pk="id",
        not_null={"response_id", "tenant", "route", "created"},
    )
    db["served"].create_index(["response_id"])
    db["served"].create_index(["tenant", "route", "created"])
    db["served"].create_index(["created"])


def _budget_log(db: sqlite_utils.Database) -> None:
    # Every move of a tenant's serving rule by its ratings, with the estimate that moved it.
    db["budget_log"].create(
        {
            "id": int,
            "tenant": str,
            "at": float,
            "threshold_from": float,
            "threshold_to": float,
            "rated": int,  # rated semantic hits at the new threshold
            "wrong": int,
            "estimate": float,  # wrong / rated at the new threshold
            "bound": float,  # its upper confidence bound
            "reason": str,
        },
        pk="id",
        not_null={"tenant", "at", "threshold_from", "threshold_to", "reason"},
    )
    db["budget_log"].create_index(["tenant", "at"])


MIGRATIONS = Migrations("edgeroute.cache")
MIGRATIONS(name="0001_entries")(_entries)
MIGRATIONS(name="0002_meta_counters")(_meta)
MIGRATIONS(name="0003_vectors_ivf")(_vectors)
MIGRATIONS(name="0004_entries_stop_word")(_stop_word)
MIGRATIONS(name="0005_served_feedback")(_served_feedback)
MIGRATIONS(name="0006_budget_log")(_budget_log)


def migrate(db: sqlite_utils.Database) -> None:
    """Apply the pending migrations in order.

    The whole run holds the write lock (BEGIN IMMEDIATE), so two processes opening a new file at
    once never both apply a step; each step is a savepoint inside it.
    """
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        MIGRATIONS.apply(db)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
