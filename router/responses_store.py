"""Stored responses of the Responses API: ``<data_dir>/responses.db``, one row per response.

A row keeps the response object (``GET /v1/responses/{id}`` returns it) and the conversation up
to and including its answer, as chat messages, which a later request's ``previous_response_id``
continues. Rows are the tenant's own: another tenant's id reads as missing. Rows older than
``retention_days`` are pruned (OpenAI keeps a response 30 days), and a tenant's beyond its newest
``max_per_tenant``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pysqlite3 as sqlite3
import sqlite_utils
from sqlite_utils.migrations import Migrations
from pydantic import BaseModel, Field

from models.files import private_file

from .errors import StoreError

log = logging.getLogger(__name__)

_PRUNE_EVERY_S: Final = 60.0


class ResponsesSettings(BaseModel):
    """``[responses]``: how long stored responses are kept (``store: false`` keeps none)."""

    retention_days: float = Field(30.0, gt=0)
    # A tenant's newest responses kept beyond this are dropped, oldest first: the file is bounded
    # by tenants x this x the request caps, not by what a client chooses to store in a month.
    max_per_tenant: int = Field(10_000, ge=1)
    db_file: str = "responses.db"


# Named and ordered, each applied once (sqlite-utils records them, as the cache's are).
MIGRATIONS = Migrations("edgeroute.responses")


@MIGRATIONS(name="0001_responses")
def _m0001_responses(db: sqlite_utils.Database) -> None:
    db["responses"].create(
        {"id": str, "tenant": str, "created_at": float, "response": str, "conversation": str},
        pk="id",
        not_null={"tenant", "created_at", "response", "conversation"},
        if_not_exists=True,
    )
    db["responses"].create_index(["created_at"], if_not_exists=True)


@MIGRATIONS(name="0002_input_items")
def _m0002_input_items(db: sqlite_utils.Database) -> None:
    if "input_items" not in db["responses"].columns_dict:
        db["responses"].add_column("input_items", str, not_null_default="[]")


@MIGRATIONS(name="0003_tenant_index")
def _m0003_tenant_index(db: sqlite_utils.Database) -> None:
    db["responses"].create_index(["tenant", "created_at"], if_not_exists=True)


class ResponseStore:
    """The node's stored responses (calls run on a worker thread, one at a time)."""

    def __init__(self, path: Path, settings: ResponsesSettings) -> None:
        self.path = path
        self._retention_s = settings.retention_days * 86400
        self._max_per_tenant = settings.max_per_tenant
        self._lock = threading.Lock()
        self._last_prune = 0.0
        try:
            private_file(path, sqlite=True)  # conversations: the operator's eyes only
            conn = sqlite3.connect(str(path), check_same_thread=False, timeout=5.0)
            self._db = sqlite_utils.Database(conn)
            self._db.enable_wal()
            MIGRATIONS.apply(self._db)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the stored responses {path}: {exc}", code="store_unavailable") from exc

    async def _run(self, what: str, work: Callable[[], Any]) -> Any:
        """``work`` on a worker thread, one call at a time."""

        def locked() -> Any:
            try:
                with self._lock:
                    return work()
            except sqlite3.Error as exc:
                raise StoreError(
                    f"cannot {what} a stored response: {exc}", code="store_unavailable"
                ) from exc

        return await asyncio.to_thread(locked)

    async def put(
        self, tenant: str, response: dict[str, Any], conversation: list[dict[str, Any]],
        input_items: list[dict[str, Any]] | None = None,
    ) -> None:
        now = time.time()
        row = {
            "id": response["id"], "tenant": tenant, "created_at": now,
            "response": json.dumps(response, ensure_ascii=False),
            "conversation": json.dumps(conversation, ensure_ascii=False),
            "input_items": json.dumps(input_items or [], ensure_ascii=False),
        }

        def work() -> None:
            with self._db.atomic():
                self._db["responses"].insert(row, replace=True)
                self._db.execute(
                    "DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE tenant = ?"
                    " ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?)",
                    [tenant, self._max_per_tenant],
                )
                if now - self._last_prune > _PRUNE_EVERY_S:
                    self._last_prune = now
                    self._db.execute("DELETE FROM responses WHERE created_at < ?", [now - self._retention_s])

        await self._run("write", work)

    async def _read(self, tenant: str, response_id: str, columns: str) -> Any:
        """One row's ``columns`` (None: missing, expired or another tenant's)."""

        def work() -> Any:
            return self._db.execute(
                f"SELECT {columns} FROM responses WHERE id = ? AND tenant = ? AND created_at >= ?",
                [response_id, tenant, time.time() - self._retention_s],
            ).fetchone()

        return await self._run("read", work)

    async def get(self, tenant: str, response_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The response object and its conversation, or None (missing, expired or another tenant's)."""
        row = await self._read(tenant, response_id, "response, conversation")
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    async def input_items(self, tenant: str, response_id: str) -> list[dict[str, Any]] | None:
        """The request's own input items (not the earlier conversation), oldest first, or None."""
        row = await self._read(tenant, response_id, "input_items")
        return None if row is None else list(json.loads(row[0]))

    async def delete(self, tenant: str, response_id: str) -> bool:
        def work() -> int:
            with self._db.atomic():
                cursor = self._db.execute("DELETE FROM responses WHERE id = ? AND tenant = ?", [response_id, tenant])
                return cursor.rowcount

        return bool(await self._run("delete", work))

    async def aclose(self) -> None:
        with self._lock:
            self._db.conn.close()
