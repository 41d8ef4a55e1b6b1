"""Continuous batching against the real INT4 model: batched output equals output alone, slots free
on cancellation, prefixes are reused, and one slot behaves like the old one-at-a-time engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from edge import EdgeSettings, LlamaEngine
from models import EDGE_DEFAULT, Completion, GenerationRequest, SamplingParams, collect, default_models_dir, resolve

pytestmark = pytest.mark.slow


def _engine(**settings: object) -> LlamaEngine:
    spec = resolve(EDGE_DEFAULT, default_models_dir())
    return LlamaEngine(spec, EdgeSettings(**{"n_ctx": 1024, "max_queue": 64, **settings}))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def engine() -> AsyncIterator[LlamaEngine]:
    eng = _engine(slots=8, prefill_chunk=32)
    yield eng  # type: ignore[misc]
    asyncio.run(eng.aclose())


def chat(text: str, max_tokens: int = 24, stop: tuple[str, ...] = (), **params: object) -> GenerationRequest:
    values: dict[str, object] = {"temperature": 0.0, **params}
    sampling = SamplingParams(max_tokens=max_tokens, stop=stop, **values)  # type: ignore[arg-type]
    return GenerationRequest(params=sampling, messages=({"role": "user", "content": text},))


LONG_TEXT = " ".join(f"Item {i} is a {('red', 'green', 'blue')[i % 3]} box." for i in range(60))


def mixed_requests() -> list[GenerationRequest]:
    """Different prompt lengths (a few tokens to ~600), max_tokens and stop sequences."""
    return [
        chat("Hi!", max_tokens=12),
        chat("Name three primary colours.", max_tokens=30),
        chat(f"{LONG_TEXT}\nHow many boxes are listed?", max_tokens=20),
        GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=40, stop=(" 9",)), prompt="1, 2, 3, 4, 5,"),
        chat("Write a short poem about the sea.", max_tokens=48, stop=("\n",)),
        chat("What is the capital of France? Answer in one word.", max_tokens=8),
        GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=5), prompt="Once upon a time"),
        chat("Explain what a CPU cache is.", max_tokens=64, stop=("memory",)),
    ]


async def alone(engine: LlamaEngine, reqs: list[GenerationRequest]) -> list[Completion]:
    return [await collect(engine.stream(r)) for r in reqs]


async def test_every_sequence_in_a_batch_equals_its_output_alone(engine: LlamaEngine) -> None:
    reqs = mixed_requests()
    solo = await alone(engine, reqs)
    together = await asyncio.gather(*(collect(engine.stream(r)) for r in reqs))
    assert [(c.text, c.finish_reason, c.usage) for c in together] == [(c.text, c.finish_reason, c.usage) for c in solo]
    # The requests really differ, stops and lengths included.
    assert len({c.text for c in solo}) == len(reqs)
    assert solo[3].text == " 6, 7, 8," and solo[3].finish_reason == "stop"
    assert (solo[6].finish_reason, solo[6].usage.completion_tokens) == ("length", 5)
    assert engine.load().depth == 0


async def test_32_concurrent_requests_on_8_slots_all_complete_with_their_own_text(engine: LlamaEngine) -> None:
    reqs = [chat(f"Tell me one fact about the number {n}.", max_tokens=6 + n % 11) for n in range(32)]
    together = await asyncio.gather(*(collect(engine.stream(r)) for r in reqs))
    solo = await alone(engine, reqs)
    assert [c.text for c in together] == [c.text for c in solo]
    assert [c.usage.completion_tokens for c in together] == [c.usage.completion_tokens for c in solo]
    assert len({c.text for c in together}) == 32
    assert engine.load().depth == 0


async def _drain_to(engine: LlamaEngine, running: int) -> None:
    for _ in range(2000):  # bounded wait on the scheduler's own bookkeeping, not a timing
        if engine.load().running == running:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the engine never got to {running} running: {engine.load()}")


async def test_a_disconnected_client_frees_its_slot_and_the_others_finish_intact(engine: LlamaEngine) -> None:
    others = [chat("Count from one to twenty in words.", max_tokens=40), chat("Describe a cat.", max_tokens=40)]
    expected = await alone(engine, others)
    before = engine.stats()
    leaver = engine.stream(chat("Write a very long story about a dragon.", max_tokens=500))
    first = await anext(leaver)  # it is decoding now
    assert first.text
    tasks = [asyncio.ensure_future(collect(engine.stream(r))) for r in others]
    await leaver.aclose()  # the client went away mid-stream
    results = await asyncio.gather(*tasks)
    assert [c.text for c in results] == [c.text for c in expected]
    await _drain_to(engine, 0)
    after = engine.stats()
    assert after.cancelled == before.cancelled + 1
    assert after.completed == before.completed + 2


async def test_cancelling_during_a_chunked_prefill_leaves_the_other_streams_intact(engine: LlamaEngine) -> None:
    # ~1000 prompt tokens at 32 a step: dozens of steps of prefill, interleaved with decoding.
    long_prompt = chat(" ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(60)), max_tokens=8)
    n_long = len(engine.prompt_tokens(long_prompt))
    assert n_long > 10 * 32
    others = [chat("Name a fruit.", max_tokens=30), chat("What is rain?", max_tokens=30)]
    expected = await alone(engine, others)
    before = engine.stats()
    running = [asyncio.ensure_future(collect(engine.stream(r))) for r in others]
    doomed = asyncio.ensure_future(collect(engine.stream(long_prompt)))
    for _ in range(2000):
        if engine.stats().prompt_tokens >= before.prompt_tokens + n_long:  # it holds a slot now
            break
        await asyncio.sleep(0.005)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    results = await asyncio.gather(*running)
    assert [c.text for c in results] == [c.text for c in expected]
    await _drain_to(engine, 0)
    after = engine.stats()
    assert after.cancelled == before.cancelled + 1
    # It was cut during its prefill: most of its prompt was never evaluated (the two others
    # reuse all but one token of their prompts from the runs above).
    evaluated = after.prefill_tokens - before.prefill_tokens
    assert evaluated < n_long // 2


async def test_a_repeated_prompt_and_a_continued_conversation_reuse_the_kv_prefix() -> None:
    eng = _engine(slots=2)
    try:
        req = chat("Name three primary colours.", max_tokens=20)
        n_prompt = len(eng.prompt_tokens(req))
        first = await collect(eng.stream(req))
        assert eng.stats().prefix_reused_tokens == 0
        again = await collect(eng.stream(req))
        assert again.text == first.text
        # Everything but the last prompt token, whose logits give the first answer token.
        assert eng.stats().prefix_reused_tokens == n_prompt - 1
        turn2 = GenerationRequest(
            params=req.params,
            messages=(
                {"role": "user", "content": "Name three primary colours."},
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": "And three secondary ones?"},
            ),
        )
        fresh = _engine(slots=1)
        try:
            unreused = await collect(fresh.stream(turn2))
        finally:
            await fresh.aclose()
        continued = await collect(eng.stream(turn2))
        reused = eng.stats().prefix_reused_tokens - (n_prompt - 1)
        assert reused >= n_prompt  # the whole first prompt, and part of the answer
        assert continued.text == unreused.text
        assert eng.stats().prompt_tokens == 2 * n_prompt + len(eng.prompt_tokens(turn2))
    finally:
        await eng.aclose()


async def test_prefix_reuse_can_be_turned_off() -> None:
    eng = _engine(slots=1, prefix_reuse=False)
    try:
        req = chat("Name three primary colours.", max_tokens=6)
        first, again = await collect(eng.stream(req)), await collect(eng.stream(req))
        assert again.text == first.text
        stats = eng.stats()
        assert (stats.prefix_reused_tokens, stats.prefill_tokens) == (0, 2 * len(eng.prompt_tokens(req)))
    finally:
        await eng.aclose()


async def test_one_slot_runs_requests_one_at_a_time_with_the_same_answers(engine: LlamaEngine) -> None:
    single = _engine(slots=1, max_queue=8)
    try:
        assert single.load().capacity == 1
        reqs = mixed_requests()[:5]
        results = await asyncio.gather(*(collect(single.stream(r)) for r in reqs))
        assert single.load().depth == 0
        batched = await alone(engine, reqs)
        assert [c.text for c in results] == [c.text for c in batched]
        stats = single.stats()
        assert (stats.running, stats.completed, stats.slots) == (0, 5, 1)
        assert single.prepare(chat("Hi")).wait_s == 0.0  # a slot is free
        busy = single.stream(chat("Write a long story about a ship.", max_tokens=400))
        await anext(busy)
        # The one slot is taken: a newcomer waits about one mean request time.
        assert single.prepare(chat("Hi")).wait_s == pytest.approx(single.stats().mean_request_s)
        await busy.aclose()
    finally:
        await single.aclose()


async def test_seeded_sampling_replays_exactly_alone_and_in_a_batch(engine: LlamaEngine) -> None:
    req = chat("Write a word.", temperature=1.0, seed=1234, max_tokens=12)
    a = await collect(engine.stream(req))
    others = [chat(f"Say {n}.", temperature=0.8, max_tokens=10) for n in range(5)]
    batch = await asyncio.gather(collect(engine.stream(req)), *(collect(engine.stream(r)) for r in others))
    assert batch[0].text == a.text
    assert engine.stats().mean_request_s is not None
