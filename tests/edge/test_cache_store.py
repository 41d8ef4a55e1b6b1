"""The cache file's bulk path and the semantic layer's verifier plumbing, on real SQLite and models."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import chat, embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, EdgeCache, Embedder
from edge.cache.keys import CacheKey, exact_key, greedy_equivalent, request_record, semantic_parts
from edge.cache.store import CacheStore, NewEntry
from models import SamplingParams, Usage


def _row(text: str, answer: str) -> NewEntry:
    k = chat(text)
    parts = semantic_parts(k)
    return NewEntry(
        tenant=k.tenant, exact_key=exact_key(k), scope=parts.scope, model=k.model,
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


GREEDY_PARAMS = {"max_tokens": None, "temperature": 0.0, "top_p": None, "seed": None, "stop": []}


@pytest.mark.parametrize(
    "sampling",
    [
        {"temperature": 0.0},
        {"temperature": 0.0, "top_p": 0.5, "seed": 9, "top_k": 5, "min_p": 0.2},  # the sampler is ignored
        {"temperature": 0.01},
        {"temperature": 0.005, "seed": 3},
        {"temperature": 2.0, "top_k": 1},
        {"temperature": 0.7, "top_k": 1, "seed": 4},
        {"temperature": 2.0, "top_p": 0.0},
        {"temperature": 1.0, "top_p": 0.01},
        {"temperature": 1.0, "min_p": 0.99},
        {"temperature": 1.0, "min_p": 1.0},
    ],
)
def test_greedy_equivalent_sampling_has_the_greedy_key(sampling: dict[str, float]) -> None:
    key = chat("Name a colour.", params=SamplingParams(**sampling))
    assert greedy_equivalent(key.params) is True
    assert request_record(key)["params"] == GREEDY_PARAMS
    assert exact_key(key) == exact_key(chat("Name a colour."))
    assert semantic_parts(key).scope == semantic_parts(chat("Name a colour.")).scope


def test_a_greedy_key_is_the_one_it_always_was() -> None:
    # Digests of the key function before sampled draws were keyed by their settings: greedy and
    # seeded entries already stored keep being found.
    greedy = chat("Name a colour.")
    assert exact_key(greedy) == "1a7df3b6446434f0c3421c9c01f8d84eab45f5a0c0b9690eb2bf19b3b1e3a483"
    assert semantic_parts(greedy).scope == "43124f4aca2b87cbbcbbeaa8723968c5d8541eae371d7ef77bcdd9a1b1f98ceb"
    seeded = chat("Name a colour.", params=SamplingParams(temperature=0.7, seed=1))
    assert exact_key(seeded) == "97acc9c092097116b0e0687ab8539297e32a874dee7d549d290f8059bd437173"
    extended = chat("Name a colour.", params=SamplingParams(temperature=0.7, seed=1, top_k=5, min_p=0.2))
    assert exact_key(extended) == "5e3d38d26c608ddd8e7815d86e6ceca14af4247d0a59aca643ccda31599f2a1b"


@pytest.mark.parametrize(
    ("sampling", "params"),
    [
        # The openai SDK and curl with no sampling settings: temperature 1, top_p 1.
        ({}, {"temperature": 1.0, "top_p": 1.0}),
        ({"temperature": 2.0}, {"temperature": 2.0, "top_p": 1.0}),
        ({"temperature": 0.011}, {"temperature": 0.011, "top_p": 1.0}),
        ({"temperature": 0.7, "top_p": 0.011}, {"temperature": 0.7, "top_p": 0.011}),
        ({"temperature": 0.7, "top_k": 2}, {"temperature": 0.7, "top_p": 1.0, "top_k": 2}),
        ({"temperature": 0.7, "top_k": 0}, {"temperature": 0.7, "top_p": 1.0, "top_k": 0}),
        ({"temperature": 0.7, "min_p": 0.98}, {"temperature": 0.7, "top_p": 1.0, "min_p": 0.98}),
        ({"temperature": 0.7, "seed": 5}, {"temperature": 0.7, "top_p": 1.0, "seed": 5}),
    ],
)
def test_a_sampled_request_is_keyed_by_its_sampling_settings(
    sampling: dict[str, float], params: dict[str, object]
) -> None:
    key = chat("Name a colour.", params=SamplingParams(**sampling))
    assert greedy_equivalent(key.params) is False
    assert request_record(key)["params"] == {"max_tokens": None, "seed": None, "stop": [], **params}


def test_a_draw_is_shared_only_by_requests_with_the_same_sampling_settings() -> None:
    def key(**sampling: float) -> CacheKey:
        return chat("Tell me a joke.", params=SamplingParams(**sampling))

    hot = key(temperature=2.0)
    assert exact_key(hot) == exact_key(key(temperature=2.0))
    assert semantic_parts(hot).scope == semantic_parts(key(temperature=2.0)).scope
    narrower = [
        key(), key(temperature=0.7), key(temperature=0.01), key(temperature=0.0),
        key(temperature=2.0, top_k=1),
        key(temperature=2.0, top_p=0.0), key(temperature=2.0, top_p=0.5), key(temperature=2.0, top_k=40),
        key(temperature=2.0, min_p=0.99), key(temperature=2.0, min_p=0.05), key(temperature=2.0, seed=1),
    ]
    # 12 requests, 5 of them greedy-equivalent (one key): 8 keys.
    assert len({exact_key(k) for k in [hot, *narrower]}) == 8
    assert exact_key(hot) not in {exact_key(k) for k in narrower}
    assert semantic_parts(hot).scope not in {semantic_parts(k).scope for k in narrower}


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
        old = store.get_exact(row.exact_key, 0.0)
        assert old is not None and (old.answer, old.stop_word) == ("old answer", None)
        assert [r["stop_word"] for r in store.export()] == [None]
    finally:
        store.close()
