"""The llama.cpp engine against the real INT4 model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from edge import EdgeSaturatedError, EdgeSettings, LlamaEngine, PromptTooLongError
from models import EDGE_DEFAULT, GenerationRequest, SamplingParams, collect, default_models_dir, resolve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine() -> LlamaEngine:
    spec = resolve(EDGE_DEFAULT, default_models_dir())
    eng = LlamaEngine(spec, EdgeSettings(n_ctx=1024, max_queue=8, slots=8))
    yield eng
    asyncio.run(eng.aclose())


def chat(text: str, **params: object) -> GenerationRequest:
    defaults: dict[str, object] = {"temperature": 0.0, "max_tokens": 24}
    defaults.update(params)
    return GenerationRequest(params=SamplingParams(**defaults), messages=({"role": "user", "content": text},))  # type: ignore[arg-type]


async def test_greedy_generation_is_repeatable_and_counts_tokens(engine: LlamaEngine) -> None:
    req = chat("Name three primary colours.")
    first = await collect(engine.stream(req))
    second = await collect(engine.stream(req))
    assert first.text == second.text
    assert first.text.strip() != ""
    assert first.usage.prompt_tokens == engine.prepare(req).prompt_tokens
    assert 1 <= first.usage.completion_tokens <= 24
    if first.finish_reason == "length":
        assert first.usage.completion_tokens == 24


def test_remembered_prompt_counts_match_a_fresh_tokenization(engine: LlamaEngine) -> None:
    texts = [f"What is {n} plus {n}?" for n in range(40)]
    fresh = [len(engine.prompt_tokens(chat(t))) for t in texts]
    assert [engine.prepare(chat(t)).prompt_tokens for t in texts] == fresh  # first time: counted
    assert [engine.prepare(chat(t)).prompt_tokens for t in texts] == fresh  # again: remembered
    raw = GenerationRequest(params=SamplingParams(), prompt=texts[0])  # no template, BOS added
    assert engine.prepare(raw).prompt_tokens == len(engine.prompt_tokens(raw)) != fresh[0]


async def test_max_tokens_bounds_the_answer(engine: LlamaEngine) -> None:
    done = await collect(engine.stream(GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=5), prompt="1, 2, 3, 4,")))
    assert (done.finish_reason, done.usage.completion_tokens) == ("length", 5)


async def test_stop_sequence_ends_generation_before_it(engine: LlamaEngine) -> None:
    req = GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=40, stop=(" 9",)), prompt="1, 2, 3, 4, 5,")
    done = await collect(engine.stream(req))
    assert done.finish_reason == "stop"
    assert done.text == " 6, 7, 8,"


async def test_same_seed_same_sample(engine: LlamaEngine) -> None:
    req = chat("Write a word.", temperature=1.0, seed=1234, max_tokens=12)
    a = await collect(engine.stream(req))
    b = await collect(engine.stream(req))
    assert a.text == b.text


async def test_assistant_prefix_is_continued(engine: LlamaEngine) -> None:
    base = chat("Count from one to ten in words.", max_tokens=30)
    full = await collect(engine.stream(base))
    cut = len(full.text) // 2
    prefix = full.text[:cut]
    cont = await collect(engine.stream(GenerationRequest(params=base.params, messages=base.messages, assistant_prefix=prefix)))
    # Greedy continuation of the same prefix reproduces the rest of the answer.
    assert (prefix + cont.text).startswith(full.text[: cut + 5])


async def test_prompt_longer_than_context_is_refused_before_queueing(engine: LlamaEngine) -> None:
    with pytest.raises(PromptTooLongError) as info:
        await collect(engine.stream(chat("word " * 2000)))
    assert info.value.code == "context_length_exceeded"
    assert "1024 tokens" in info.value.message
    with pytest.raises(PromptTooLongError):
        await collect(engine.stream(chat("hello", max_tokens=1020)))
    assert engine.load().depth == 0


async def test_concurrent_requests_each_get_their_own_answer(engine: LlamaEngine) -> None:
    prompts = [f"{i}, {i + 1}, {i + 2}," for i in range(10, 90, 10)]
    reqs = [GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=8), prompt=p) for p in prompts]
    alone = [await collect(engine.stream(r)) for r in reqs]
    together = await asyncio.gather(*(collect(engine.stream(r)) for r in reqs))
    assert [c.text for c in together] == [c.text for c in alone]
    assert engine.load().depth == 0


async def test_queue_bound_refuses_excess_and_engine_recovers(engine: LlamaEngine) -> None:
    # 8 slots run, 8 more may wait (max_queue); all 24 arrive before the first can finish.
    req = GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=32), prompt="Once upon a time")
    streams: list[AsyncIterator[object]] = [engine.stream(req) for _ in range(24)]
    tasks = [asyncio.ensure_future(collect(s)) for s in streams]  # type: ignore[arg-type]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    refused = [r for r in results if isinstance(r, EdgeSaturatedError)]
    served = [r for r in results if not isinstance(r, BaseException)]
    assert (len(served), len(refused)) == (16, 8)
    assert refused[0].code == "edge_saturated"
    assert {c.text for c in served} == {served[0].text}
    assert (await collect(engine.stream(req))).usage.completion_tokens == 32


async def test_abandoned_stream_frees_the_engine(engine: LlamaEngine) -> None:
    req = GenerationRequest(params=SamplingParams(temperature=0.0, max_tokens=400), prompt="1, 2, 3,")
    stream = engine.stream(req)
    await anext(stream)
    await stream.aclose()
    for _ in range(100):
        if engine.load().depth == 0:
            break
        await asyncio.sleep(0.05)
    assert engine.load().depth == 0


def test_the_length_bound_never_exceeds_the_real_count(engine: LlamaEngine) -> None:
    # "#" * 80 is one token: a bound that took the longest piece for 32 bytes put this over its count.
    texts = ["Hi", "a" * 5000, "supercalifragilistic " * 300, "数字 " * 400, "<|im_start|>" * 50, "#" * 8000]
    for text in texts:
        req = chat(text)
        assert engine.min_prompt_tokens(req) <= len(engine.prompt_tokens(req))
    assert engine.min_prompt_tokens(chat("x" * 320_000)) == 320_000 // 81  # this vocabulary's longest piece


async def test_a_prepared_prompt_is_admitted_with_the_tokens_counted_before(
    engine: LlamaEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    req = chat("Count these words once.", max_tokens=4)
    prepared = engine.prepare(req)
    assert prepared.prompt_tokens == len(engine.prompt_tokens(req))
    assert list(prepared.tokens or ()) == engine.prompt_tokens(req)
    assert prepared.too_long is None and prepared.n_ctx == 1024
    assert (prepared.queue.running, prepared.queue.waiting, prepared.queue.capacity) == (0, 0, 8)

    def no_tokenizing(*args: object, **kwargs: object) -> list[int]:
        raise AssertionError("the prepared prompt was tokenized again")

    monkeypatch.setattr(engine, "tokenize", no_tokenizing)
    answer = await collect(prepared.stream(req))  # admitted with the tokens prepare counted
    assert answer.usage.prompt_tokens == prepared.prompt_tokens
    with pytest.raises(AssertionError, match="tokenized again"):
        await collect(prepared.stream(chat("Count these words once.", max_tokens=4)))  # another request: counted anew


def test_prepare_checks_the_window_once_for_the_router_and_the_engine(engine: LlamaEngine) -> None:
    fits = engine.prepare(chat("Hi", max_tokens=8))
    assert fits.too_long is None
    over = engine.prepare(chat("Hi", max_tokens=2000))
    assert isinstance(over.too_long, PromptTooLongError)
    assert over.too_long.message == (
        f"this model's context window is 1024 tokens; the prompt has {over.prompt_tokens} tokens + max_tokens 2000. "
        "Shorten the messages or lower max_tokens."
    )
    # Beyond the window by its length alone: refused from the lower bound, the template never rendered.
    huge = engine.prepare(chat("x" * 320_000, max_tokens=None))
    assert huge.tokens is None and huge.prompt_tokens == 320_000 // 81
    assert isinstance(huge.too_long, PromptTooLongError)
    assert "the prompt has at least 3950 tokens." in huge.too_long.message
    assert (huge.too_long.param, huge.too_long.code) == ("messages", "context_length_exceeded")
    # A count already known (a cached answer's) is taken as it is.
    known = engine.prepare(chat("Hi"), prompt_tokens=3)
    assert (known.tokens, known.prompt_tokens, known.too_long) == (None, 3, None)
