"""The cache's layers: each looks a request up its own way; the cache asks them in order.

A layer answers with an :class:`Found` (an entry and its similarity) or None, and may leave on
the :class:`Probe` what it learned on the way (the prompt's embedding, why a near-duplicate was
refused) for the layers after it and for the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from .._fair import FairRunner
from .keys import CacheKey, exact_key, semantic_parts
from .store import CacheStore, Entry

LayerKind = Literal["exact", "semantic"]


@dataclass
class Probe:
    """One lookup as it goes through the layers."""

    key: CacheKey
    min_created: float
    tiers: Sequence[str]
    want_embedding: bool
    embedding: np.ndarray | None = field(default=None, repr=False)
    refusal: str | None = None  # why the nearest near-duplicate was refused (guard reason or "verifier")


@dataclass(frozen=True, slots=True)
class Found:
    entry: Entry
    similarity: float
    probability: float | None = None  # the verifier's, when it judged the entry


class CacheLayer(Protocol):
    """One way of finding a stored answer for a request."""

    kind: LayerKind

    def find(self, probe: Probe) -> Awaitable[Found | None]: ...


class ExactLayer:
    """The same request (normalized) asked before: one indexed read, inline on the caller's thread
    (cheaper than a hop to the reader). With ``want_embedding`` the entry's stored embedding comes
    along, so routing can score the prompt without a model run."""

    kind: LayerKind = "exact"

    def __init__(self, db: CacheStore) -> None:
        self._db = db

    async def find(self, probe: Probe) -> Found | None:
        entry = self._db.get_exact(exact_key(probe.key), probe.min_created, probe.tiers)
        if entry is None:
            return None
        if probe.want_embedding:
            probe.embedding = self._db.stored_embedding(entry.id)
        return Found(entry, 1.0)


# (tenant, text, scope, scope_id, vector, min_created, tiers) -> candidates, best first
Judge = Callable[..., list[Any]]


class SemanticLayer:
    """A question asked before in other words: the nearest neighbours of the prompt's embedding,
    judged (similarity floor, guards, verifier) on the reader thread."""

    kind: LayerKind = "semantic"

    def __init__(
        self,
        embed: Callable[[str, str], Awaitable[np.ndarray]],
        judge: Judge,
        reader: FairRunner,
        usable: Callable[[str], bool],
    ) -> None:
        self._embed, self._judge, self._reader, self._usable = embed, judge, reader, usable

    async def find(self, probe: Probe) -> Found | None:
        key = probe.key
        parts = semantic_parts(key)
        if not self._usable(parts.text):
            return None
        vec = await self._embed(parts.text, key.tenant)
        probe.embedding = vec
        cands = await self._reader.run(
            key.tenant, self._judge, key.tenant, parts.text, parts.scope, parts.scope_id, vec,
            probe.min_created, probe.tiers,
        )
        accepted = next((c for c in cands if c.refusal is None), None)
        if accepted is not None:
            return Found(accepted.entry, accepted.similarity, accepted.probability)
        probe.refusal = cands[0].refusal if cands else None
        return None
