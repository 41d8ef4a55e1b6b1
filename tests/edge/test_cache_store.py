"""The cache file's bulk path and the semantic layer's verifier plumbing, on real SQLite and models."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from edge.cache.keys import exact_key, request_record, semantic_parts
from edge.cache.store import CacheStore, NewEntry
from models import Usage


def _row(text: str, answer: str) -> NewEntry:
    k = chat(text)
    parts = semantic_parts(k)
    return NewEntry(
        tenant=k.tenant, exact_key=exact_key(k), scope=parts.scope, scope_id=parts.scope_id, model=k.model,
        prompt_text=parts.text, request=request_record(k), answer=answer, finish_reason="stop",
        prompt_tokens=0, completion_tokens=0, tier="warmup", embedding=None,
    )


def test_bulk_rows_with_the_same_exact_key_are_one_entry(tmp_path: Path) -> None:
    # "What is X?" and " What is X? " normalize alike: the bulk insert used to fail with
    # "UNIQUE constraint failed: entries.exact_key".
    store = CacheStore(tmp_path / "c.db")
    rows = [_row("What is X?", "first"), _row("Other question?", "other"), _row(" What is X? \n", "last")]
    vecs = np.eye(3, 384, dtype=np.float32)
    assert store.put_bulk(rows, vecs, now=time.time()) == 2
    got = store.read.execute("SELECT prompt_text, answer FROM entries ORDER BY id").fetchall()
    assert got == [("Other question?", "other"), ("What is X?", "last")]
    assert store.read.execute("SELECT count(*) FROM cache_vec").fetchone()[0] == 2
    # and again over existing entries: replaced, not duplicated
    assert store.put_bulk(rows[:1], vecs[:1], now=time.time()) == 1
    assert store.read.execute("SELECT answer FROM entries WHERE prompt_text = 'What is X?'").fetchall() == [("first",)]
    store.close()


async def test_a_semantic_hit_carries_the_verifier_probability(
    tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture  # noqa: F811
) -> None:
    with caplog.at_level(logging.INFO, logger="edge.cache"):
        cache = EdgeCache(tmp_path / "c.db", CacheSettings(), embedder=embedder)
    assert any("verifier threshold" in r.message and "max_wrong_rate 0.050" in r.message for r in caplog.records)
    try:
        await cache.store(chat("How do I reset my password?"), "Settings.", "stop", Usage(1, 1), "edge")
        look = await cache.lookup(chat("how can I reset my password"))
        assert look.hit is not None and look.hit.kind == "semantic"
        assert look.hit.probability is not None and cache.threshold <= look.hit.probability < 1.0
        runs = cache.verifier.model.runs
        vec, cands = await cache.candidates(chat("How can I reset my password?"))
        assert cache.verifier.model.runs == runs + 1  # every candidate in one model run
        assert cands[0].probability is not None and cands[0].refusal is None
        exact = await cache.lookup(chat("How do I reset my password?"))
        assert exact.hit is not None and exact.hit.kind == "exact" and exact.hit.probability is None
    finally:
        await cache.aclose()


async def test_an_explicit_threshold_overrides_the_budget(tmp_path: Path, embedder: Embedder) -> None:  # noqa: F811
    cache = EdgeCache(tmp_path / "c.db", CacheSettings(verifier_threshold=0.999999), embedder=embedder)
    try:
        assert cache.threshold == 0.999999
        await cache.store(chat("How do I reset my password?"), "Settings.", "stop", Usage(1, 1), "edge")
        look = await cache.lookup(chat("how can I reset my password"))
        assert look.hit is None and look.refusal == "verifier"
    finally:
        await cache.aclose()


def test_a_response_schema_and_penalties_are_part_of_both_keys_and_absent_leave_them_as_they_were() -> None:
    from dataclasses import replace

    from models import JSON_OBJECT

    plain = chat("Name a colour.")
    shaped = replace(plain, params=replace(plain.params, json_schema=JSON_OBJECT))
    other = replace(plain, params=replace(plain.params, json_schema='{"type":"string"}'))
    penalized = replace(plain, params=replace(plain.params, frequency_penalty=0.5))
    present = replace(plain, params=replace(plain.params, presence_penalty=0.5))
    biased = replace(plain, params=replace(plain.params, logit_bias=((7, -100.0),)))
    variants = (plain, shaped, other, penalized, present, biased)
    assert len({exact_key(k) for k in variants}) == 6
    assert len({semantic_parts(k).scope for k in variants}) == 6
    assert set(request_record(plain)["params"]) == {"max_tokens", "temperature", "top_p", "seed", "stop"}  # keys did not move
    assert request_record(shaped)["params"]["json_schema"] == JSON_OBJECT


def test_the_sampler_extensions_key_what_they_can_change() -> None:
    from dataclasses import replace

    greedy = chat("Name a colour.")  # temperature 0
    sampled = replace(greedy, params=replace(greedy.params, temperature=0.7, seed=1))

    def with_(key: CacheKey, **fields: object) -> CacheKey:
        return replace(key, params=replace(key.params, **fields))

    # Greedy decoding ignores top_k and min_p; the repeat penalty changes even a greedy answer.
    assert exact_key(with_(greedy, top_k=5, min_p=0.2)) == exact_key(greedy)
    assert exact_key(with_(greedy, repeat_penalty=1.1)) != exact_key(greedy)
    keys = {exact_key(k) for k in (sampled, with_(sampled, top_k=5), with_(sampled, min_p=0.2), with_(sampled, top_k=6))}
    assert len(keys) == 4
    assert request_record(with_(greedy, repeat_penalty=1.1))["params"]["repeat_penalty"] == 1.1


async def test_a_hit_reports_the_stop_word_its_answer_was_stored_with(tmp_path: Path, embedder: Embedder) -> None:  # noqa: F811
    cache = EdgeCache(tmp_path / "c.db", CacheSettings(), embedder=embedder)
    try:
        await cache.store(chat("Count to three, please."), "1, 2", "stop", Usage(1, 3), "edge", stop_word=", 3")
        await cache.store(chat("Say hello to me."), "Hello!", "stop", Usage(1, 2), "edge")
        exact = await cache.lookup(chat("Count to three, please."))
        assert exact.hit is not None and (exact.hit.kind, exact.hit.text, exact.hit.stop_word) == ("exact", "1, 2", ", 3")
        plain = await cache.lookup(chat("Say hello to me."))
        assert plain.hit is not None and plain.hit.stop_word is None
        assert {r["answer"]: r["stop_word"] for r in cache.db.export()} == {"1, 2": ", 3", "Hello!": None}
    finally:
        await cache.aclose()


def test_a_file_from_before_the_stop_word_is_upgraded_in_place(tmp_path: Path) -> None:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    from edge.cache import migrations
    from edge.cache.store import connect

    path = tmp_path / "old.db"
    conn = connect(path)
    older = Migrations("edgeroute.cache")  # the schema as it was: the first three steps only
    for name, step in (("0001_entries", migrations._entries), ("0002_meta_counters", migrations._meta),
                       ("0003_vectors_ivf", migrations._vectors)):
        older(name=name)(step)
    db = Database(conn)
    older.apply(db)
    row = _row("What is X?", "old answer")
    db["entries"].insert({
        "tenant": row.tenant, "exact_key": row.exact_key, "scope": row.scope, "model": row.model,
        "prompt_text": row.prompt_text, "request": "{}", "answer": row.answer, "finish_reason": "stop",
        "tier": "edge", "created": time.time(), "last_used": time.time(),
    })
    conn.close()
    store = CacheStore(path)
    try:
        assert [m.name for m in migrations.MIGRATIONS.applied(Database(store.read))][-3:] == [
            "0004_entries_stop_word", "0005_served_feedback", "0006_budget_log"]
        old = store.get_exact(row.exact_key, 0.0, ("edge",))
        assert old is not None and (old.answer, old.stop_word) == ("old answer", None)
        assert [r["stop_word"] for r in store.export()] == [None]
    finally:
        store.close()
