"""Each guard on hand-written pairs (refused, with the reason counted) and on paraphrases (still hit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cache_helpers import chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from edge.cache.guards import check as guard_check
from models import Usage

# (stored prompt, query that must be refused, reason, paraphrase of the stored prompt that must hit)
CASES = [
    ("How do I enable two-factor authentication?", "How do I disable two-factor authentication?", "polarity",
     "How can I enable two-factor authentication?"),
    ("Is coffee good for your health?", "Is coffee bad for your health?", "polarity", "Is coffee good for health?"),
    ("Why is the sky blue?", "Why is the sky not blue?", "negation", "Why is the sky so blue?"),
    ("How many legs do 3 spiders have?", "How many legs do 4 spiders have?", "number",
     "How many legs do three spiders have?"),
    ("How do I use pivot tables in Excel?", "How do I use pivot tables in Google Sheets?", "entity",
     "How can I use pivot tables in Excel?"),
    ("How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Celsius?", "order",
     "How can I convert Celsius to Fahrenheit?"),
]
# Guard-level only: the shipped verifier is stricter than the guards on some of these paraphrases,
# and several refused queries are already below the cosine floor (the embedding separates them).
GUARD_ONLY = [
    ("What is the capital of France?", "What is the capital of Germany?", "entity", "What's the capital of France?"),
    ("How do I install Docker on Ubuntu?", "How do I install Docker on Fedora?", "entity",
     "How can I install Docker on Ubuntu?"),
    ("Best movies of 2019", "Best movies of 2020", "number", "The best movies of 2019"),
    ("How can I lose weight without exercise?", "How can I lose weight with exercise?", "negation",
     "How do I lose weight without exercise?"),
    ("How do I turn on dark mode?", "How do I turn off dark mode?", "polarity", "How can I turn on dark mode?"),
    ("Why can't I sleep at night?", "Why can I sleep at night?", "negation", "Why am I unable to sleep at night?"),
    ("What is 15 times 4?", "What is 15 times 5?", "number", "What's fifteen times 4?"),
    ("How long is the train from London to Paris?", "How long is the train from Paris to London?", "order",
     "How long is the train ride from London to Paris?"),
]


@pytest.mark.parametrize(("stored", "query", "reason", "paraphrase"), CASES + GUARD_ONLY)
def test_guard_refuses_the_pair_and_passes_the_paraphrase(stored: str, query: str, reason: str, paraphrase: str) -> None:
    assert guard_check(query, stored) == reason
    assert guard_check(stored, query) == reason  # symmetric
    assert guard_check(paraphrase, stored) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("How do I turn on dark mode?", "How can I enable dark mode?"),
        ("What is 5 plus 3?", "What is five plus three?"),
        ("Top 10 movies of 2020", "Top ten films of 2020"),
        ("Flights from London to Paris", "Which flights go to Paris from London?"),
        ("Compare Python and Java", "Compare Java and Python"),
        ("What is the capital of France?", "What's France's capital city?"),
        ("How do I learn Python quickly?", "How can I quickly learn Python?"),
        # A negating prefix against a written "not" is the same negation; "non-" written apart is one word.
        ("Why am I unhappy at work?", "Why am I not happy at work?"),
        ("What is a non-profit organization?", "What is a nonprofit organization?"),
        ("How many calories should I take daily?", "How much daily calorie intake do I need?"),  # no "in-" negation
        ("How do I decorate a 70s and 80s bedroom?", "How do I decorate an 80s and 70s bedroom?"),  # joined by "and"
    ],
)
def test_rephrasings_that_keep_the_meaning_pass_every_guard(a: str, b: str) -> None:
    assert guard_check(a, b) is None


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("Is Messi better than Ronaldo?", "Is Ronaldo better than Messi?", "order"),
        ("What percentage of Muslims are terrorists?", "What percentage of terrorists are Muslim?", "order"),
        ("What are the pros of remote work?", "What are the cons of remote work?", "polarity"),
        ("How do I increase the volume?", "How do I decrease the volume?", "polarity"),
        ("Does this work without internet?", "Does this work with internet?", "negation"),
        ("Which contractions are acceptable in essays?", "Which contractions are unacceptable in essays?", "negation"),
        ("Is it legal to drive barefoot?", "Is it illegal to drive barefoot?", "negation"),
        ("What is a non-profit organization?", "What is a profit organization?", "negation"),
        ("What percent of 80 is 20?", "What percent of 20 is 80?", "order"),
        ("Which islands are in the hurricane belt?", "Which islands are outside the hurricane belt?", "polarity"),
        ("What are the safest areas of Rio?", "What are the most dangerous areas of Rio?", "polarity"),
    ],
)
def test_more_refusals(a: str, b: str, reason: str) -> None:
    assert guard_check(a, b) == reason


@pytest.fixture
async def cache(tmp_path: Path, embedder: Embedder) -> EdgeCache:  # noqa: F811
    c = EdgeCache(tmp_path / "cache.db", CacheSettings(), embedder=embedder)
    yield c
    await c.aclose()


async def test_through_the_cache_each_refusal_is_counted_by_reason_and_paraphrases_hit(cache: EdgeCache) -> None:
    for stored, _, _, _ in CASES:
        await cache.store(chat(stored), f"answer to {stored}", "stop", Usage(1, 1), "edge")
    expected: dict[str, int] = {}
    for stored, query, reason, paraphrase in CASES:
        refused = await cache.lookup(chat(query))
        assert refused.hit is None, query
        assert refused.refusal == reason, query
        expected[reason] = expected.get(reason, 0) + 1
        hit = (await cache.lookup(chat(paraphrase))).hit
        assert hit is not None, paraphrase
        assert (hit.kind, hit.text) == ("semantic", f"answer to {stored}")
    refusals = cache.stats()["refusals"]
    assert {k: v for k, v in refusals.items() if v} == expected
    assert cache.counters["semantic_hits"] == len(CASES)


async def test_cosine_alone_would_have_served_the_antonym(cache: EdgeCache) -> None:
    """The reason guards exist: the opposite question is nearer than the threshold."""
    await cache.store(chat("How do I turn on dark mode?"), "Settings.", "stop", Usage(1, 1), "edge")
    vec, cands = await cache.candidates(chat("How do I turn off dark mode?"))
    assert cands[0].similarity > 0.85
    assert cands[0].refusal == "polarity"
