"""Ratings of served answers against the real cache (real embedder, verifier, SQLite): the stored
record, tenant scoping, the per-tenant threshold moved by ratings, vetoes, and the budget rule."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from edge.cache import feedback
from edge.cache.calibration import wrong_rate_upper
from models import Usage

USAGE = Usage(5, 2)


@pytest.fixture
async def cache(tmp_path: Path, embedder: Embedder) -> EdgeCache:  # noqa: F811
    c = EdgeCache(tmp_path / "cache.db", CacheSettings(), embedder=embedder)
    yield c
    await c.aclose()


async def _semantic_hit(cache: EdgeCache, stored: str, asked: str, tenant: str = "t1"):
    await cache.store(chat(stored, tenant), "Settings > Display.", "stop", USAGE, "edge")
    look = await cache.lookup(chat(asked, tenant))
    assert look.hit is not None and look.hit.kind == "semantic"
    return look


async def test_a_rating_is_stored_with_the_decision_and_scoped_to_its_tenant(cache: EdgeCache) -> None:
    look = await _semantic_hit(cache, "How do I turn on dark mode?", "How can I turn on dark mode?")
    cache.note_served("chatcmpl-1", "t1", "cache-semantic", look.hit, chat("How can I turn on dark mode?"), look.embedding)
    cache.note_served("chatcmpl-2", "t1", "edge")
    assert await cache.rate("chatcmpl-1", "t2", "right") is None  # another tenant's: as if unknown
    assert await cache.rate("chatcmpl-nope", "t1", "right") is None
    record = await cache.rate("chatcmpl-1", "t1", "right", "looks fine")
    assert record is not None
    assert (record["id"], record["rating"], record["note"], record["route"], record["entry_id"], record["tenant"]) == (
        "chatcmpl-1", "right", "looks fine", "cache-semantic", look.hit.entry_id, "t1")
    assert record["query"] == "How can I turn on dark mode?"
    assert record["verifier"] == pytest.approx(look.hit.probability)
    assert record["threshold"] == cache.threshold
    assert (await cache.rate("chatcmpl-2", None, "wrong"))["route"] == "edge"  # an operator: any tenant
    queue = await cache.review_queue("t1")
    assert [(q["id"], q["rating"], q["stored_question"]) for q in queue] == [
        ("chatcmpl-1", "right", "How do I turn on dark mode?")]


async def test_a_wrong_semantic_hit_vetoes_the_entry_for_that_query_and_paraphrases(cache: EdgeCache) -> None:
    asked = "How can I turn on dark mode?"
    look = await _semantic_hit(cache, "How do I turn on dark mode?", asked)
    cache.note_served("chatcmpl-w", "t1", "cache-semantic", look.hit, chat(asked), look.embedding)
    await cache.rate("chatcmpl-w", "t1", "wrong")
    again = await cache.lookup(chat(asked))
    assert (again.hit, again.refusal) == (None, "feedback")
    near = await cache.lookup(chat("How can I switch on dark mode?"))
    assert near.hit is None and near.refusal == "feedback"
    other = await cache.lookup(chat("How do I turn on dark mode?", tenant="t2"))  # its own tenant's empty cache
    assert other.hit is None
    # Rated right afterwards (a mistaken click undone): the veto goes.
    await cache.rate("chatcmpl-w", "t1", "right")
    assert (await cache.lookup(chat(asked))).hit is not None


async def test_a_wrong_exact_hit_deletes_the_entry(cache: EdgeCache) -> None:
    key = chat("Name a colour.")
    await cache.store(key, "Seven.", "stop", USAGE, "edge")
    hit = (await cache.lookup(key)).hit
    cache.note_served("chatcmpl-e", "t1", "cache-exact", hit, key)
    await cache.rate("chatcmpl-e", "t1", "wrong")
    assert (await cache.lookup(key)).hit is None


async def test_wrong_ratings_raise_the_tenant_threshold_and_it_survives_a_restart(
    tmp_path: Path, embedder: Embedder  # noqa: F811
) -> None:
    path = tmp_path / "budget.db"
    cache = EdgeCache(path, CacheSettings(), embedder=embedder)
    base = cache.threshold
    try:
        look = await _semantic_hit(cache, "How do I turn on dark mode?", "How can I turn on dark mode?")
        cache.note_served("r-1", "t1", "cache-semantic", look.hit, chat("How can I turn on dark mode?"), look.embedding)
        await cache.rate("r-1", "t1", "wrong")
        moved = cache.feedback.threshold("t1")
        assert moved == float(np.nextafter(look.hit.probability, np.inf)) > base
        assert cache.feedback.threshold("t2") == base  # another tenant's rule is its own
        status = (await cache.budget_status())["t1"]
        assert (status["rated"], status["wrong"], status["threshold"], status["base_threshold"]) == (1, 1, moved, base)
        assert [(h["threshold_from"], h["threshold_to"], h["reason"]) for h in status["history"]] == [
            (base, moved, "stricter: wrong ratings")]
    finally:
        await cache.aclose()
    again = EdgeCache(path, CacheSettings(), embedder=embedder)
    try:
        assert again.feedback.threshold("t1") == moved
        assert ("t1", look.hit.entry_id) in again.feedback.vetoes
    finally:
        await again.aclose()


def test_the_rule_is_stricter_on_wrong_ratings_and_looser_only_with_enough_right_ones() -> None:
    conf, kind, budget_ = 0.8413, "wilson", 0.05
    R = feedback.Rated
    assert feedback.choose([], 0.9, budget_, conf, kind).threshold == 0.9  # no ratings: the calibrated rule
    right_only = [R(0.95, False)] * 3
    assert feedback.choose(right_only, 0.9, budget_, conf, kind).threshold == 0.9
    one_wrong = [*right_only, R(0.93, True)]
    rule = feedback.choose(one_wrong, 0.9, budget_, conf, kind)
    assert rule.threshold == float(np.nextafter(0.93, np.inf)) and (rule.rated, rule.wrong) == (3, 0)
    # Enough right ratings at or above the wrong one bring the bound within the budget: back to 0.9.
    many = [*[R(0.95, False)] * 70, R(0.93, True)]
    upper = float(wrong_rate_upper(np.array([1]), np.array([71]), conf, kind)[0])
    assert upper <= budget_
    rule = feedback.choose(many, 0.9, budget_, conf, kind)
    assert (rule.threshold, rule.rated, rule.wrong, rule.bound) == (0.9, 71, 1, pytest.approx(upper))
    few = [*[R(0.95, False)] * 10, R(0.93, True)]
    assert feedback.choose(few, 0.9, budget_, conf, kind).threshold > 0.93
    # A wrong rating below the rule in force does not move it.
    assert feedback.choose([R(0.85, True)], 0.9, budget_, conf, kind).threshold == 0.9


def test_the_calibration_prior_counts_as_ratings_at_its_out_of_sample_rate() -> None:
    # A replay of 100 served at >= 0.9 with 1 wrong, and 100 refused (-1): at 0.9 the prior's
    # rate is (1 + 1) / (100 + 2) / 0.5 and it weighs 150 ratings.
    scores = np.array([0.95] * 99 + [0.91] + [-1.0] * 100)
    wrong = np.array([False] * 99 + [True] + [True] * 100)
    prior = feedback.Prior(scores, wrong, 150.0, 0.5)
    assert prior.at(0.9) == (150.0, pytest.approx(150 * 2 / 102 / 0.5))
    assert prior.at(0.93) == (150.0, pytest.approx(150 * 1 / 101 / 0.5))  # only the 99 right ones
    assert prior.at(0.99) == (150.0, pytest.approx(150 * 0.5 / 0.5))  # nothing served: 1 / 2, capped at 1

    conf, kind, budget_ = 0.8413, "wilson", 0.05
    R = feedback.Rated
    low = feedback.Prior(np.array([0.95] * 258), np.array([False] * 253 + [True] * 5), 150.0, 0.6)
    one_wrong = [*[R(0.95, False)] * 46, R(0.93, True)]
    # Without the prior one wrong among 47 moves the rule above it; with it the base holds, and
    # the bound is over both: 1 + 150 * 6 / 260 / 0.6 wrong of 47 + 150.
    assert feedback.choose(one_wrong, 0.9, budget_, conf, kind).threshold == float(np.nextafter(0.93, np.inf))
    rule = feedback.choose(one_wrong, 0.9, budget_, conf, kind, low)
    pooled = float(wrong_rate_upper(np.array([1 + 150 * 6 / 260 / 0.6]), np.array([197.0]), conf, kind)[0])
    assert (rule.threshold, rule.rated, rule.wrong, rule.bound) == (0.9, 47, 1, pytest.approx(pooled))
    assert pooled <= budget_
    # More wrong ratings than the prior can carry: stricter again, up to where one wrong is left.
    three_wrong = [*[R(0.95, False)] * 46, R(0.93, True), R(0.94, True), R(0.92, True)]
    rule = feedback.choose(three_wrong, 0.9, budget_, conf, kind, low)
    assert (rule.threshold, rule.rated, rule.wrong) == (float(np.nextafter(0.93, np.inf)), 47, 1)
    # A tenant's own wrong rate above the budget outweighs the prior once it has the ratings.
    many = [*[R(0.95, False)] * 280, *[R(0.93, True)] * 20]
    assert feedback.choose(many, 0.9, budget_, conf, kind, low).threshold == float(np.nextafter(0.93, np.inf))


def test_the_prior_comes_from_the_shipped_replay_unless_switched_off() -> None:
    from edge.cache import Verifier

    verifier = Verifier.shipped()
    prior = feedback.prior_of(verifier, CacheSettings())
    assert prior is not None and prior.weight == 150.0 and prior.margin == 0.6
    assert len(prior.scores) == len(verifier.replay.scores) == 2012
    assert feedback.prior_of(verifier, CacheSettings(budget_prior_ratings=0)) is None
    assert feedback.prior_of(None, CacheSettings()) is None


def _log_rows(cache: EdgeCache, tenant: str = "t1") -> list[tuple[float, float, str]]:
    return cache.db.write.execute(
        "SELECT threshold_from, threshold_to, reason FROM budget_log WHERE tenant = ? ORDER BY id", (tenant,)
    ).fetchall()


def _moves(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.name == "edge.cache.feedback" and "threshold" in r.getMessage())


async def test_the_same_rating_again_runs_no_rule_and_logs_nothing(
    cache: EdgeCache, caplog: pytest.LogCaptureFixture
) -> None:
    asked = "How can I turn on dark mode?"
    look = await _semantic_hit(cache, "How do I turn on dark mode?", asked)
    cache.note_served("chatcmpl-s", "t1", "cache-semantic", look.hit, chat(asked), look.embedding)
    base = cache.threshold
    moved = float(np.nextafter(look.hit.probability, np.inf))
    with caplog.at_level(logging.INFO, logger="edge.cache.feedback"):
        first = await cache.rate("chatcmpl-s", "t1", "wrong", "not the same question")
        assert (_log_rows(cache), _moves(caplog)) == ([(base, moved, "stricter: wrong ratings")], 1)
        for _ in range(3):  # the very same rating: not even its time is written
            assert await cache.rate("chatcmpl-s", "t1", "wrong", "not the same question") == first
        noted = await cache.rate("chatcmpl-s", None, "wrong", "a different question", "operator")
        replaced = {"note": "a different question", "rated_by": "operator", "rated_at": noted["rated_at"]}
        assert noted == {**first, **replaced}
        assert noted["rated_at"] >= first["rated_at"]
        assert (len(_log_rows(cache)), _moves(caplog), cache.feedback.threshold("t1")) == (1, 1, moved)
        # A real change runs the rule: one row and one line.
        back = await cache.rate("chatcmpl-s", "t1", "right")
        assert (back["rating"], back["note"], back["rated_by"]) == ("right", None, "tenant")
        assert (_log_rows(cache)[1:], _moves(caplog)) == ([(moved, base, "looser: right ratings")], 2)
        assert cache.feedback.threshold("t1") == base


async def test_the_budget_log_keeps_each_tenants_newest_rows(
    tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture  # noqa: F811
) -> None:
    cache = EdgeCache(tmp_path / "log.db", CacheSettings(budget_log_rows=3), embedder=embedder)
    try:
        asked = "How can I turn on dark mode?"
        moved: dict[str, float] = {}
        for tenant in ("t1", "t2"):
            look = await _semantic_hit(cache, "How do I turn on dark mode?", asked, tenant)
            key = chat(asked, tenant)
            cache.note_served(f"r-{tenant}", tenant, "cache-semantic", look.hit, key, look.embedding)
            moved[tenant] = float(np.nextafter(look.hit.probability, np.inf))
        base = cache.threshold
        with caplog.at_level(logging.INFO, logger="edge.cache.feedback"):
            for flip in range(10):
                await cache.rate("r-t1", "t1", "wrong" if flip % 2 == 0 else "right")
            await cache.rate("r-t2", "t2", "wrong")
        assert _moves(caplog) == 11  # every real change logged once
        # t1's last three of its ten moves (wrong, right, ..., right); t2's one move is its own.
        stricter = (base, moved["t1"], "stricter: wrong ratings")
        looser = (moved["t1"], base, "looser: right ratings")
        assert _log_rows(cache, "t1") == [looser, stricter, looser]
        assert _log_rows(cache, "t2") == [(base, moved["t2"], "stricter: wrong ratings")]
        assert cache.db.write.execute("SELECT count(*) FROM budget_log").fetchone()[0] == 4
    finally:
        await cache.aclose()
