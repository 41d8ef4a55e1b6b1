"""The cache as an ordered list of layers behind one small interface."""

from __future__ import annotations

from pathlib import Path

import pytest
from cache_helpers import chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from edge.cache.layers import ExactLayer, Found, Probe, SemanticLayer
from models import Usage


@pytest.fixture
async def cache(tmp_path: Path, embedder: Embedder) -> EdgeCache:  # noqa: F811
    c = EdgeCache(tmp_path / "cache.db", CacheSettings(), embedder=embedder)
    yield c
    await c.aclose()


class Recorder:
    """A layer that finds nothing and notes what it was asked."""

    kind = "exact"

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def find(self, probe: Probe) -> Found | None:
        self.asked.append(probe.key.messages[-1]["content"] if probe.key.messages else "")
        return None


async def test_layers_are_exact_then_semantic(cache: EdgeCache) -> None:
    assert [type(layer) for layer in cache.layers] == [ExactLayer, SemanticLayer]
    assert [layer.kind for layer in cache.layers] == ["exact", "semantic"]


async def test_layers_are_asked_in_order_until_one_finds(cache: EdgeCache) -> None:
    await cache.store(chat("How do I turn on dark mode?"), "Settings > Display.", "stop", Usage(7, 3), "edge")
    before, after = Recorder(), Recorder()
    cache.layers = [before, *cache.layers, after]
    look = await cache.lookup(chat("How do I turn on dark mode?"))
    assert look.hit is not None and look.hit.kind == "exact"
    assert (before.asked, after.asked) == (["How do I turn on dark mode?"], [])
    miss = await cache.lookup(chat("What is the boiling point of water at sea level?"))
    assert miss.hit is None and miss.embedding is not None  # the semantic layer left its embedding
    assert after.asked == ["What is the boiling point of water at sea level?"]
    assert cache.counters["exact_hits"] == 1 and cache.counters["misses"] == 1
