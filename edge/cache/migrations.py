"""The cache file's schema: named migrations applied in order, each recorded once."""

from __future__ import annotations

import sqlite_utils
from sqlite_utils.migrations import Migrations

from .index import CODE_BYTES, IvfIndex

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


MIGRATIONS = Migrations("edgeroute.cache")
MIGRATIONS(name="0001_entries")(_entries)
MIGRATIONS(name="0002_meta_counters")(_meta)
MIGRATIONS(name="0003_vectors_ivf")(_vectors)
MIGRATIONS(name="0004_entries_stop_word")(_stop_word)


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply the pending migrations in order; return their names.

    The whole run holds the write lock (BEGIN IMMEDIATE), so two processes opening a new file at
    once never both apply a step; each step is a savepoint inside it.
    """
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        names = [m.name for m in MIGRATIONS.pending(db)]
        MIGRATIONS.apply(db)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return names
