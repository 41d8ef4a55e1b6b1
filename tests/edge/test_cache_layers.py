"""A lookup asks the exact layer, then the semantic one; the first that finds an answer serves it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cache_helpers import chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from models import Usage


@pytest.fixture
async def cache(tmp_path: Path, embedder: Embedder) -> EdgeCache:  # noqa: F811
    c = EdgeCache(tmp_path / "cache.db", CacheSettings(), embedder=embedder)
    yield c
    await c.aclose()


async def test_the_exact_layer_answers_before_the_semantic_one_is_asked(cache: EdgeCache) -> None:
    await cache.store(chat("How do I turn on dark mode?"), "Settings > Display.", "stop", Usage(7, 3), "edge")
    runs = cache.embedder.runs
    look = await cache.lookup(chat("How do I turn on dark mode?"))
    assert look.hit is not None and look.hit.kind == "exact"
    assert look.embedding is None and cache.embedder.runs == runs  # the semantic layer was not asked
    miss = await cache.lookup(chat("What is the boiling point of water at sea level?"))
    assert miss.hit is None and miss.embedding is not None  # the semantic layer left its embedding
    assert cache.embedder.runs == runs + 1
    assert cache.counters["exact_hits"] == 1 and cache.counters["misses"] == 1
