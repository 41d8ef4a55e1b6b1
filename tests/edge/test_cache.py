"""The cache against the real embedder and real SQLite: hits, keys, tenants, TTL, eviction, policy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cache_helpers import GREEDY, chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from edge.cache.warmup import read_warmup
from edge.cache.keys import skip_probability
from edge.cache.store import CacheStore
from edge.errors import CacheError
from models import SamplingParams, Usage

USAGE = Usage(7, 3)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def cache(tmp_path: Path, embedder: Embedder, clock: Clock) -> EdgeCache:  # noqa: F811
    c = EdgeCache(tmp_path / "cache.db", CacheSettings(), embedder=embedder, clock=clock)
    yield c
    await c.aclose()


async def test_miss_then_exact_hit_returns_the_stored_answer(cache: EdgeCache) -> None:
    key = chat("How do I reset my password?")
    first = await cache.lookup(key)
    assert first.hit is None and first.refusal is None
    entry_id = await cache.store(key, "Open Settings.", "stop", USAGE, "edge")
    hit = (await cache.lookup(key)).hit
    assert hit is not None
    assert (hit.kind, hit.text, hit.finish_reason, hit.usage, hit.similarity, hit.tier, hit.entry_id) == (
        "exact", "Open Settings.", "stop", USAGE, 1.0, "edge", entry_id,
    )


async def test_whitespace_and_unicode_normalisation_still_hits_exactly(cache: EdgeCache) -> None:
    await cache.store(chat("Caf\u00e9 opening hours?"), "9-5", "stop", USAGE, "cloud")
    hit = (await cache.lookup(chat("  Cafe\u0301 opening hours?\r\n"))).hit
    assert hit is not None and hit.kind == "exact" and hit.tier == "cloud"


async def test_paraphrase_is_a_semantic_hit_with_its_similarity(cache: EdgeCache) -> None:
    await cache.store(chat("How do I turn on dark mode?"), "Settings > Display.", "stop", USAGE, "edge")
    look = await cache.lookup(chat("How can I turn on dark mode?"))
    assert look.hit is not None and look.hit.kind == "semantic"
    assert look.hit.text == "Settings > Display."
    assert 0.9 < look.hit.similarity < 1.0
    assert look.embedding is not None and look.embedding.shape == (384,)


async def test_unrelated_prompt_misses(cache: EdgeCache) -> None:
    await cache.store(chat("How do I turn on dark mode?"), "Settings.", "stop", USAGE, "edge")
    look = await cache.lookup(chat("What is the boiling point of water?"))
    assert look.hit is None and look.refusal is None


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.5, "seed": 1},
        {"max_tokens": 10},
        {"stop": ("\n",)},
        {"seed": 3, "temperature": 0.7},
    ],
)
async def test_every_answer_changing_parameter_is_part_of_the_key(cache: EdgeCache, change: dict) -> None:
    await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
    other = chat("Name a colour.", params=replace(GREEDY, **change))
    look = await cache.lookup(other)
    assert look.hit is None  # neither exact nor semantic: parameters are part of the scope


async def test_model_alias_tools_and_system_prompt_are_part_of_the_key(cache: EdgeCache) -> None:
    await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
    assert (await cache.lookup(chat("Name a colour.", model="cloud"))).hit is None
    assert (await cache.lookup(chat("Name a colour.", extra={"tools": [{"name": "f"}]}))).hit is None
    assert (await cache.lookup(chat("Name a colour.", system="Answer in French."))).hit is None
    assert (await cache.lookup(chat("Name a colour."))).hit is not None


async def test_greedy_requests_ignore_seed_and_top_p(cache: EdgeCache) -> None:
    await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
    look = await cache.lookup(chat("Name a colour.", params=SamplingParams(temperature=0.0, seed=9, top_p=0.5)))
    assert look.hit is not None and look.hit.kind == "exact"


async def test_tenant_b_never_sees_tenant_a_answer(cache: EdgeCache) -> None:
    await cache.store(chat("What is our refund policy?", tenant="a"), "A's secret policy", "stop", USAGE, "edge")
    for text in ("What is our refund policy?", "What's our refund policy?"):
        look = await cache.lookup(chat(text, tenant="b"))
        assert look.hit is None
    assert (await cache.lookup(chat("What's our refund policy?", tenant="a"))).hit is not None
    await cache.store(chat("What is our refund policy?", tenant="b"), "B's policy", "stop", USAGE, "edge")
    assert (await cache.lookup(chat("What is our refund policy?", tenant="b"))).hit.text == "B's policy"
    assert (await cache.lookup(chat("What is our refund policy?", tenant="a"))).hit.text == "A's secret policy"


async def test_ttl_expires_entries(tmp_path: Path, embedder: Embedder, clock: Clock) -> None:  # noqa: F811
    cache = EdgeCache(tmp_path / "c.db", CacheSettings(ttl_s=60), embedder=embedder, clock=clock)
    try:
        await cache.store(chat("How do I turn on dark mode?"), "Settings.", "stop", USAGE, "edge")
        clock.now += 59
        assert (await cache.lookup(chat("How do I turn on dark mode?"))).hit is not None
        assert (await cache.lookup(chat("How can I turn on dark mode?"))).hit is not None
        clock.now += 2
        assert (await cache.lookup(chat("How do I turn on dark mode?"))).hit is None
        assert (await cache.lookup(chat("How can I turn on dark mode?"))).hit is None
        # the next write purges what expired
        await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
        assert [r["prompt_text"] for r in cache.db.export()] == ["Name a colour."]
    finally:
        await cache.aclose()


async def test_lru_eviction_drops_the_least_recently_used(tmp_path: Path, embedder: Embedder, clock: Clock) -> None:  # noqa: F811
    cache = EdgeCache(tmp_path / "c.db", CacheSettings(max_entries=3), embedder=embedder, clock=clock)
    prompts = ["What is the capital of Italy?", "How tall is Mount Everest?", "Who wrote Hamlet?",
               "What is the speed of light?"]
    try:
        for p in prompts[:3]:
            clock.now += 1
            await cache.store(chat(p), p.upper(), "stop", USAGE, "edge")
        clock.now += 1
        assert (await cache.lookup(chat(prompts[0]))).hit is not None  # now the most recently used
        clock.now += 1
        await cache.store(chat(prompts[3]), "c", "stop", USAGE, "edge")
        present = [(await cache.lookup(chat(p))).hit is not None for p in prompts]
        assert present == [True, False, True, True]
        assert cache.counters["evictions"] == 1
        assert cache.db.stats()["entries"] == 3
        assert cache.db.read.execute("SELECT count(*) FROM cache_vec").fetchone()[0] == 3  # codes go too
    finally:
        await cache.aclose()


async def test_sampling_requests_are_cached_by_default_whatever_the_temperature(cache: EdgeCache) -> None:
    hot = chat("Tell me a joke.", params=SamplingParams(temperature=0.8))
    assert cache.cacheable(hot)
    entry_id = await cache.store(hot, "joke", "stop", USAGE, "edge")
    assert entry_id is not None
    # A draw answers requests with the same sampling settings, by its text and by a paraphrase.
    hit = (await cache.lookup(chat("Tell me a joke.", params=SamplingParams(temperature=0.8)))).hit
    assert (hit.kind, hit.text, hit.entry_id) == ("exact", "joke", entry_id)
    hit = (await cache.lookup(chat("Tell me a joke, please.", params=SamplingParams(temperature=0.8)))).hit
    assert (hit.kind, hit.text, hit.entry_id) == ("semantic", "joke", entry_id)
    # Any other sampling is another draw; greedy and seeded requests ask for one exact answer.
    others = ({"temperature": 1.0, "top_p": 0.9}, {"temperature": 0.8, "top_p": 0.9},
              {"temperature": 0.8, "top_k": 1}, {"temperature": 0.8, "min_p": 0.1}, {"temperature": 0.0},
              {"temperature": 0.8, "seed": 3})
    for other in others:
        for text in ("Tell me a joke.", "Tell me a joke, please."):
            assert (await cache.lookup(chat(text, params=SamplingParams(**other)))).hit is None, (other, text)


async def test_greedy_equivalent_requests_share_the_greedy_entry(cache: EdgeCache) -> None:
    entry_id = await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
    for same in ({"temperature": 0.01}, {"temperature": 2.0, "top_k": 1}, {"temperature": 2.0, "top_p": 0.0},
                 {"temperature": 1.0, "min_p": 0.99}):
        hit = (await cache.lookup(chat("Name a colour.", params=SamplingParams(**same)))).hit
        assert (hit.kind, hit.text, hit.entry_id) == ("exact", "Blue.", entry_id), same
    # A greedy-equivalent request's answer is stored as the greedy one.
    near = chat("Name a fruit.", params=SamplingParams(temperature=1.0, top_k=1))
    stored = await cache.store(near, "Apple.", "stop", USAGE, "edge")
    hit = (await cache.lookup(chat("Name a fruit."))).hit
    assert (hit.kind, hit.text, hit.entry_id) == ("exact", "Apple.", stored)


async def test_deterministic_only_restores_the_opt_in_policy(tmp_path: Path, embedder: Embedder) -> None:  # noqa: F811
    c = EdgeCache(tmp_path / "d.db", CacheSettings(deterministic_only=True), embedder=embedder)
    try:
        hot = chat("Tell me a joke.", params=SamplingParams(temperature=0.8))
        assert not c.cacheable(hot)
        assert c.cacheable(chat("Tell me a joke.", params=SamplingParams(temperature=0.8, top_k=1)))  # greedy
        assert await c.store(hot, "joke", "stop", USAGE, "edge") is None
        assert await c.store(hot, "joke", "stop", USAGE, "edge", opt=True) is not None
        assert (await c.lookup(hot, opt=True)).hit.text == "joke"
        assert (await c.lookup(hot)).hit is None  # without the opt-in it is not even looked up
    finally:
        await c.aclose()


def test_skip_probability_grows_with_temperature_as_gptcache_s() -> None:
    p = [skip_probability(SamplingParams(temperature=t), True) for t in (0.0, 0.5, 1.0, 1.5, 2.0)]
    assert p[0] == 0.0 and p[4] == 1.0
    assert p[1] == pytest.approx(0.11920, abs=1e-5) and p[2] == pytest.approx(0.26894, abs=1e-5)
    assert p[1] < p[2] < p[3] < p[4]
    assert skip_probability(SamplingParams(temperature=1.0, seed=1), True) == 0.0
    assert skip_probability(SamplingParams(temperature=2.0, top_k=1), True) == 0.0  # greedy
    assert skip_probability(SamplingParams(temperature=1.9), CacheSettings().skip_by_temperature) == 0.0


async def test_a_skipped_lookup_still_stores_its_answer(tmp_path: Path, embedder: Embedder) -> None:  # noqa: F811
    c = EdgeCache(tmp_path / "k.db", CacheSettings(skip_by_temperature=True), embedder=embedder)
    try:
        hot = chat("Tell me a joke.", params=SamplingParams(temperature=2.0))  # skipped every time
        assert await c.store(hot, "joke", "stop", USAGE, "edge") is not None
        look = await c.lookup(hot)
        assert (look.hit, look.refusal) == (None, "temperature-skip")
        assert (await c.lookup(hot, opt=True)).hit.text == "joke"  # the request's own opt-in wins
        assert c.counters["skipped_temperature"] == 1
    finally:
        await c.aclose()


async def test_per_request_opt_out(cache: EdgeCache) -> None:
    key = chat("Name a colour.")
    assert await cache.store(key, "Blue.", "stop", USAGE, "edge", opt=False) is None
    await cache.store(key, "Blue.", "stop", USAGE, "edge")
    assert (await cache.lookup(key, opt=False)).hit is None
    assert (await cache.lookup(key)).hit is not None


async def test_lookup_can_embed_for_routing_when_not_cacheable(cache: EdgeCache) -> None:
    look = await cache.lookup(chat("Name a colour."), opt=False, want_embedding=True)
    assert look.hit is None and look.embedding is not None and look.embedding.shape == (384,)


async def test_an_exact_hit_returns_the_stored_embedding_only_when_asked(cache: EdgeCache) -> None:
    await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
    assert (await cache.lookup(chat("Name a colour."))).embedding is None
    assert cache.embedder is not None
    runs = cache.embedder.runs
    look = await cache.lookup(chat("Name a colour."), want_embedding=True)
    assert look.hit is not None and look.hit.kind == "exact"
    assert look.embedding is not None and look.embedding.shape == (384,)
    assert cache.embedder.runs == runs  # read back from the file, not computed again
    fresh = await cache.embedder.embed("Name a colour.")
    assert float(look.embedding @ fresh) > 0.99  # the same text's embedding


async def test_unfinished_answers_and_bad_tiers_are_not_stored(cache: EdgeCache) -> None:
    assert await cache.store(chat("x y z"), "partial", "error", USAGE, "edge") is None
    with pytest.raises(CacheError, match="tier must be one of edge, cloud, warmup, not 'moon'"):
        await cache.store(chat("x y z"), "a", "stop", USAGE, "moon")


async def test_storing_the_same_key_replaces_the_answer(cache: EdgeCache) -> None:
    await cache.store(chat("Name a colour."), "Blue.", "stop", USAGE, "edge")
    await cache.store(chat("Name a colour."), "Red.", "stop", USAGE, "cloud")
    assert (await cache.lookup(chat("Name a colour."))).hit.text == "Red."
    assert cache.db.stats()["entries"] == 1


async def test_stats_counters_persist_across_reopen(tmp_path: Path, embedder: Embedder) -> None:  # noqa: F811
    path = tmp_path / "c.db"
    cache = EdgeCache(path, CacheSettings(), embedder=embedder)
    await cache.store(chat("How do I turn on dark mode?"), "S", "stop", USAGE, "edge")
    await cache.lookup(chat("How do I turn on dark mode?"))
    await cache.lookup(chat("How do I turn off dark mode?"))
    await cache.lookup(chat("What is the boiling point of water?"))
    stats = cache.stats()
    assert stats["process"]["exact_hits"] == 1
    assert stats["process"]["misses"] == 2
    assert stats["refusals"]["polarity"] == 1
    await cache.aclose()
    reopened = CacheStore(path)
    assert reopened.stats()["counters"] == {"stores": 1, "exact_hits": 1, "misses": 2, "refused_polarity": 1}
    assert reopened.stats()["hits_recorded"] == 1
    reopened.close()


async def test_clear_one_tenant_and_export(cache: EdgeCache) -> None:
    await cache.store(chat("Name a colour.", tenant="a"), "Blue.", "stop", USAGE, "edge")
    await cache.store(chat("Name a colour.", tenant="b"), "Red.", "stop", USAGE, "edge")
    assert cache.db.clear("a") == 1
    rows = list(cache.db.export())
    assert [(r["tenant"], r["answer"], r["request"]["messages"][0]["content"]) for r in rows] == [
        ("b", "Red.", "Name a colour.")
    ]
    assert (await cache.lookup(chat("Name a colour.", tenant="a"))).hit is None


async def test_warm_up_file_entries_serve_requests(tmp_path: Path, cache: EdgeCache) -> None:
    f = tmp_path / "warm.jsonl"
    f.write_text(
        '{"prompt": "How do I reset my password?", "answer": "Settings > Account."}\n'
        '\n{"prompt": "Opening hours?", "answer": "9-5", "tenant": "shop", "model": "edge"}\n'
    )
    for item in read_warmup(f):
        await cache.store(item.key, item.answer, "stop", USAGE, "warmup", opt=True)
    hit = (await cache.lookup(chat("How can I reset my password?", tenant="default"))).hit
    assert hit is not None and hit.text == "Settings > Account." and hit.tier == "warmup"
    assert (await cache.lookup(chat("Opening hours?", tenant="shop", model="edge"))).hit.text == "9-5"


def test_malformed_warm_up_line_names_its_number(tmp_path: Path) -> None:
    f = tmp_path / "warm.jsonl"
    f.write_text('{"prompt": "a", "answer": "b"}\n{"prompt": "no answer"}\n')
    with pytest.raises(CacheError, match=r"warm.jsonl:2: "):
        list(read_warmup(f))


def test_an_unusable_file_is_a_cache_error(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CacheError):
        CacheStore(bad)
