"""What the dashboard reads from the node, as small structural types, and how it finds them.

The dashboard never imports the cache or the pool: ``app.state.node.pool`` and
``app.state.node.cache`` are read through these protocols, and either may be absent (None),
in which case the page says "not configured". Methods may be plain or ``async``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from litestar.datastructures import State

from router.telemetry import EdgeLoadView, PoolView, Telemetry, telemetry_of

T = TypeVar("T")


class CacheView(Protocol):
    """What the cache page needs from the edge cache."""

    def stats(self) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]:
        """Counters: ``entries``, ``size_bytes``, ``evictions``, ``refusals`` ({reason: n}); others as is."""
        ...

    def entries_per_tenant(self) -> Mapping[str, int] | Awaitable[Mapping[str, int]]: ...

    def search(
        self, text: str, tenant: str | None = None, limit: int = 20
    ) -> Sequence[Any] | Awaitable[Sequence[Any]]:
        """Entries whose prompt matches ``text`` (exact substring or nearest neighbours): each has
        ``id``, ``tenant``, ``model``, ``prompt``, ``text`` and ``tier`` (attributes or keys), and a
        ``score`` (the similarity) when a nearest-neighbour search found it."""
        ...

    def delete(self, entry_id: int) -> bool | Awaitable[bool]:
        """Remove one entry; False when there was none with that id."""
        ...


@runtime_checkable
class FeedbackView(Protocol):
    """What the cache page's review queue and error budget need (a cache without ratings lacks it)."""

    def review_queue(
        self, tenant: str | None = None, limit: int = 50
    ) -> Sequence[Mapping[str, Any]] | Awaitable[Sequence[Mapping[str, Any]]]:
        """Recent semantic hits, newest first: id, tenant, query, stored_question, answer, similarity,
        verifier, threshold, served_at, rating, note."""
        ...

    def budget_status(
        self, tenant: str | None = None
    ) -> Mapping[str, Mapping[str, Any]] | Awaitable[Mapping[str, Mapping[str, Any]]]:
        """Per tenant with ratings: threshold, base_threshold, rated, wrong, estimate, bound, history."""
        ...

    def rate(
        self, response_id: str, tenant: str | None, rating: str, note: str | None = None, by: str = "tenant"
    ) -> Mapping[str, Any] | None | Awaitable[Mapping[str, Any] | None]: ...


async def resolve(value: T | Awaitable[T]) -> T:
    """The value of a protocol method that may be sync or async."""
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(frozen=True, slots=True)
class NodeParts:
    """The parts of the running node a page may show; any of them may be missing."""

    telemetry: Telemetry | None
    edge: EdgeLoadView | None
    pool: PoolView | None
    cache: CacheView | None


def node_parts(state: State) -> NodeParts:
    node = getattr(state, "node", None)
    edge = getattr(node, "edge", None)
    return NodeParts(
        telemetry=telemetry_of(state),
        edge=edge if isinstance(edge, EdgeLoadView) else None,
        pool=getattr(node, "pool", None),
        cache=getattr(node, "cache", None),
    )
