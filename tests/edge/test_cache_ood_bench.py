"""``bench.cache_ood``: its hand-written pairs as shipped, and its replay deciding each pair alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cache_helpers import embedder  # noqa: F401  (module-scoped fixture)

from bench.cache_ood import DEFAULT, Pair, load, replay, summary
from edge import Embedder


def test_the_pairs_are_600_read_blind_in_seven_categories() -> None:
    pairs = load(DEFAULT)
    assert len(pairs) == 600 and len({(p.stored, p.query) for p in pairs}) == 600
    assert Counter(p.category for p in pairs) == {
        "paraphrase": 240, "scope": 75, "object": 75, "number": 60, "entity": 60, "negation": 45, "direction": 45,
    }
    assert all(p.servable == (p.category == "paraphrase") for p in pairs)


async def test_each_pair_is_decided_against_its_own_stored_question_only(embedder: Embedder, tmp_path: Path) -> None:  # noqa: F811
    pairs = [
        Pair("How do I reverse a list in Python?", "how do I reverse a list in python", True, "paraphrase", "p"),
        Pair("Which contractions are acceptable in essays?", "Which contractions are unacceptable in essays?", False, "negation", "w"),
        Pair("What percent of 80 is 20?", "What percent of 20 is 80?", False, "direction", "m"),
    ]
    rows = await replay(pairs, embedder, tmp_path)
    assert [r["served"]["shipped"] for r in rows] == [True, False, False]
    assert [r["refusal"] for r in rows] == [None, "negation", "order"]
    assert all(r["served"]["cosine >= 0.80"] for r in rows)
    result = summary(rows)
    assert result["deciders"]["shipped"] == {"served": 1, "right": 1, "wrong": 0, "precision": 1.0, "recall_of_servable": 1.0}
    assert result["deciders"]["cosine >= 0.80"]["wrong"] == 2
