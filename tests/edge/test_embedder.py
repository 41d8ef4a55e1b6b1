"""The ONNX embedder: shape, normalisation, agreement between paths, micro-batching, errors.

The INT8 model (the default) runs one text per model run; the fp32 model shares runs, so the
tests of shared runs use it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, Embedder, EmbedderError
from edge.embedder import MAX_SKIPS, _Text, pick_run


def test_embed_batch_gives_unit_float32_rows(embedder: Embedder) -> None:  # noqa: F811
    vecs = embedder.embed_batch(["How do I turn on dark mode?", "", "x " * 1000])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_batch([]).shape == (0, 384)


def test_similar_sentences_are_closer_than_unrelated(embedder: Embedder) -> None:  # noqa: F811
    a, b, c = embedder.embed_batch(["How do I reset my password?", "How can I reset my password?", "Best pizza in Rome"])
    assert a @ b > 0.9 > 0.3 > a @ c


async def test_async_embed_equals_the_batch_path(embedder: Embedder) -> None:  # noqa: F811
    text = "What is the capital of France?"
    one = await embedder.embed(text)
    np.testing.assert_allclose(one, embedder.embed_batch([text])[0], atol=1e-5)


def _sharing() -> Embedder:
    """The fp32 model, whose texts share model runs."""
    emb = Embedder.load(CacheSettings(embed_int8=False))
    assert emb.run_rows is None
    return emb


def test_an_int8_vector_does_not_depend_on_the_texts_run_with_it(embedder: Embedder) -> None:  # noqa: F811
    text = "How do I learn Python quickly?"
    others = ["What is the capital of France?", "Why do cats hate dogs so much and what can I do about it?"]
    alone = embedder.embed_batch([text])[0]
    assert embedder.run_rows == 1
    np.testing.assert_array_equal(embedder.embed_batch([*others, text])[-1], alone)
    embedder.run_rows = None  # as it ran before: one run for the three, activations scaled together
    try:
        shared = embedder.embed_batch([*others, text])[-1]
    finally:
        embedder.run_rows = 1
    assert not np.array_equal(shared, alone) and 0.95 < float(shared @ alone) < 1.0


async def test_concurrent_int8_calls_give_each_text_its_own_vector(embedder: Embedder) -> None:  # noqa: F811
    texts = [f"question number {i} about caching, {'with more words ' * i}" for i in range(6)]
    before = embedder.runs
    vecs = await asyncio.gather(*(embedder.embed(t, key=f"tenant{i % 2}") for i, t in enumerate(texts)))
    assert embedder.runs - before == 6  # one model run a text
    np.testing.assert_array_equal(np.stack(vecs), np.stack([embedder.embed_batch([t])[0] for t in texts]))


async def test_concurrent_calls_share_one_model_run(tmp_path: Path) -> None:
    emb = _sharing()
    emb.window_s = 0.05  # generous: every call below is queued before the window closes
    try:
        texts = [f"question number {i} about caching" for i in range(16)]
        before = emb.runs
        vecs = await asyncio.gather(*(emb.embed(t) for t in texts))
        assert emb.runs - before == 1
        np.testing.assert_allclose(np.stack(vecs), emb.embed_batch(texts), atol=1e-5)
    finally:
        emb.close()


async def test_default_window_batches_calls_made_together() -> None:
    emb = _sharing()
    assert emb.window_s == 0.0
    try:
        before = emb.runs
        await asyncio.gather(*(emb.embed(f"text {i}") for i in range(8)))
        assert emb.runs - before == 1
    finally:
        emb.close()


async def test_batches_are_bounded_by_max_batch() -> None:
    emb = _sharing()
    emb.window_s, emb.max_batch = 0.05, 4
    try:
        before = emb.runs
        await asyncio.gather(*(emb.embed(f"text {i}") for i in range(10)))
        assert emb.runs - before == 3  # 4 + 4 + 2
    finally:
        emb.close()


async def test_a_key_with_one_text_is_not_kept_behind_another_keys_many() -> None:
    emb = _sharing()
    emb.window_s, emb.max_batch = 0.05, 2
    order: list[str] = []

    async def one(name: str, key: str) -> None:
        await emb.embed(f"question {name}", key)
        order.append(name)

    try:
        await asyncio.gather(*(one(f"a{i}", "a") for i in range(5)), one("b0", "b"))
        # a0 and a1 filled a batch at once; the rest waited for it and were then taken in turn
        # across keys: b's text rides in the second batch, not the third (first come, first served)
        assert [sorted(order[:2]), sorted(order[2:4]), sorted(order[4:])] == [["a0", "a1"], ["a2", "b0"], ["a3", "a4"]]
    finally:
        emb.close()


def _runs(emb: Embedder, texts: list[str]) -> tuple[list[list[int]], np.ndarray]:
    runs: list[list[int]] = []
    vecs = np.empty((len(texts), 384), dtype=np.float32)

    def done(rows: list[int], out: np.ndarray) -> None:
        runs.append(rows)
        vecs[rows] = out

    emb.embed_runs(texts, done)
    return runs, vecs


def test_texts_are_answered_run_by_run_shortest_first(embedder: Embedder) -> None:  # noqa: F811
    long = " ".join(["word"] * 300)  # truncated to the model's 256 tokens: 8 fit one run
    texts = [long + f" {i}" for i in range(9)] + ["a short question?"]
    emb = _sharing()
    try:
        runs, vecs = _runs(emb, texts)
        assert runs == [[9, 0, 1, 2, 3, 4, 5, 6], [7, 8]]  # the short one in the first run
        np.testing.assert_allclose(vecs, emb.embed_batch(texts), atol=1e-5)
    finally:
        emb.close()
    runs, vecs = _runs(embedder, texts)  # INT8: one text a run, the short one first
    assert runs == [[9], [0], [1], [2], [3], [4], [5], [6], [7], [8]]
    np.testing.assert_array_equal(vecs, embedder.embed_batch(texts))


async def _texts(*specs: tuple[str, str, int]) -> list[_Text]:
    loop = asyncio.get_running_loop()
    return [_Text(name + " " + "x" * chars, key, loop.create_future()) for name, key, chars in specs]


async def test_the_next_run_is_the_shortest_texts_within_the_token_budget() -> None:
    long, s1, s2, s3 = await _texts(("long", "a", 2000), ("s1", "a", 40), ("s2", "a", 40), ("s3", "a", 400))
    assert (long.tokens, s1.tokens, s3.tokens) == (256, 12, 102)
    run = pick_run([long, s1, s2, s3], max_batch=32, budget=220)
    assert run == [s1, s2]  # s3 would make 3 x 102 > 220
    assert (long.skipped, s1.skipped, s2.skipped, s3.skipped) == (1, 0, 0, 1)


async def test_a_text_passed_over_enough_times_goes_first() -> None:
    (long,) = await _texts(("long", "a", 2000))
    pending = [long]
    for i in range(MAX_SKIPS):
        pending += await _texts((f"q{i}", "a", 40))
        run = pick_run(pending, max_batch=32, budget=300)
        assert run == pending[1:]  # shorter ones still go first
        pending = [long]
    pending += await _texts(("late", "a", 40))
    assert pick_run(pending, max_batch=32, budget=300) == [long]  # 2 x 256 > 300


async def test_a_run_of_one_text_takes_the_shortest_and_passes_over_the_rest() -> None:
    long, s1, s2 = await _texts(("long", "a", 2000), ("s1", "a", 40), ("s2", "a", 30))
    assert pick_run([long, s1, s2], max_batch=32, rows=1) == [s2]
    assert (long.skipped, s1.skipped, s2.skipped) == (1, 1, 0)


async def test_the_next_run_is_picked_in_turns_across_keys() -> None:
    a = await _texts(*((f"a{i}", "a", 40) for i in range(6)))
    (b,) = await _texts(("b", "b", 200))
    run = pick_run([*a, b], max_batch=4)  # a0, b, a1, a2 are the candidates
    assert run == [a[0], a[1], a[2], b]


async def test_a_question_is_answered_before_long_prompts_queued_with_it() -> None:
    emb = Embedder.load()
    emb.window_s = 0.05
    order: list[str] = []
    texts = {f"long{i}": " ".join(["word"] * 300) + f" {i}" for i in range(6)} | {"short": "a short question?"}

    async def one(name: str) -> np.ndarray:
        vec = await emb.embed(texts[name])
        order.append(name)
        return vec

    try:
        before = emb.runs
        vecs = await asyncio.gather(*(one(name) for name in texts))
        assert order[0] == "short"
        assert emb.runs - before == 7  # the question, then each long prompt alone (256 tokens each)
        alone = np.stack([emb.embed_batch([text])[0] for text in texts.values()])
        np.testing.assert_allclose(np.stack(vecs), alone, atol=1e-5)  # each ran alone
    finally:
        emb.close()


def test_a_missing_or_corrupt_model_is_an_embedder_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx file")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError):
        Embedder(bad, CacheSettings())
