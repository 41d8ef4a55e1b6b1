"""An answer as it was served, noted with the cache's decision for a later rating."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class Served:
    """One answer as it was served, noted for a later rating."""

    response_id: str
    tenant: str
    route: str
    created: float
    entry_id: int | None = None
    query: str | None = None
    similarity: float | None = None
    probability: float | None = None
    threshold: float | None = None
    embedding: np.ndarray | None = field(default=None, repr=False)

    def row(self) -> tuple[Any, ...]:
        emb = None if self.embedding is None else np.asarray(self.embedding, dtype=np.float32).tobytes()
        return (self.response_id, self.tenant, self.route, self.entry_id, self.query, self.similarity,
                self.probability, self.threshold, emb, self.created)


def insert_served(conn: Any, rows: list[Served]) -> None:
    conn.executemany(
        "INSERT INTO served (response_id, tenant, route, entry_id, query, similarity, probability, threshold,"
        " embedding, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [r.row() for r in rows],
    )
