"""Browsing the cache for an operator: entries per tenant, text search, deleting one entry."""

from __future__ import annotations

from typing import Any

from .store import CacheStore, _translate


def entries_per_tenant(store: CacheStore) -> dict[str, int]:
    with _translate("entries per tenant"), store._read_lock:
        rows = store.read.execute("SELECT tenant, count(*) FROM entries GROUP BY tenant ORDER BY tenant").fetchall()
    return {tenant: n for tenant, n in rows}


def search(store: CacheStore, text: str, tenant: str | None, limit: int) -> list[dict[str, Any]]:
    """Entries whose question or answer contains ``text`` (case-insensitive), newest first."""
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    sql = (
        "SELECT id, tenant, model, prompt_text, answer, tier, hits, created FROM entries"
        " WHERE (prompt_text LIKE ? ESCAPE '\\' OR answer LIKE ? ESCAPE '\\')"
    )
    args: list[Any] = [pattern, pattern]
    if tenant:
        sql += " AND tenant = ?"
        args.append(tenant)
    sql += " ORDER BY id DESC LIMIT ?"
    args.append(int(limit))
    with _translate("search"), store._read_lock:
        rows = store.read.execute(sql, args).fetchall()
    return [
        {"id": r[0], "tenant": r[1], "model": r[2], "prompt": r[3], "text": r[4], "tier": r[5], "hits": r[6], "created": r[7]}
        for r in rows
    ]


def delete(store: CacheStore, entry_id: int) -> bool:
    with store._transaction("delete"):
        found = store.write.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None
        if found:
            store._delete_ids([entry_id])
    store.count = store._count()
    return found
