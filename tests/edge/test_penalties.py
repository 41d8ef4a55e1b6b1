"""OpenAI's frequency and presence penalties on the edge (llama.cpp's penalties sampler), and
llama.cpp's server's sampler extensions: repeat_penalty, top_k, min_p."""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Iterator

import pytest

from edge import EdgeSettings, LlamaEngine
from edge._grammar import free
from edge._runtime import penalties_sampler
from models import EDGE_DEFAULT, REPEAT_WINDOW, GenerationRequest, SamplingParams, collect, default_models_dir, resolve


def _applied(sampler: object, logits: dict[int, float]) -> dict[int, float]:
    import llama_cpp

    data = (llama_cpp.llama_token_data * len(logits))(*(llama_cpp.llama_token_data(t, v, 0.0) for t, v in logits.items()))
    arr = llama_cpp.llama_token_data_array(
        data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=len(logits), selected=-1, sorted=False
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(arr))
    return {data[i].id: round(data[i].logit, 4) for i in range(arr.size)}


def test_each_earlier_use_lowers_a_token_by_frequency_and_any_use_by_presence() -> None:
    # The answer so far used token 5 twice and token 7 once; token 9 never.
    sampler = penalties_sampler(64, [5, 5, 7], frequency=0.5, presence=0.25)
    try:
        assert _applied(sampler, {5: 1.0, 7: 1.0, 9: 1.0}) == {5: 1.0 - 2 * 0.5 - 0.25, 7: 1.0 - 0.5 - 0.25, 9: 1.0}
    finally:
        free(sampler)


def test_the_repeat_penalty_divides_a_recent_positive_logit_and_multiplies_a_negative_one() -> None:
    # Token 3 opened a prompt longer than the window: out of reach.
    sampler = penalties_sampler(REPEAT_WINDOW, [3] + [9] * 62 + [5, 7], repeat=2.0)
    try:
        assert _applied(sampler, {3: 1.0, 5: 1.0, 7: -1.0, 8: 1.0}) == {3: 1.0, 5: 0.5, 7: -2.0, 8: 1.0}
    finally:
        free(sampler)


@pytest.fixture(scope="module")
def engine() -> Iterator[LlamaEngine]:
    eng = LlamaEngine(resolve(EDGE_DEFAULT, default_models_dir()), EdgeSettings(n_ctx=1024, max_queue=8, slots=2))
    yield eng
    asyncio.run(eng.aclose())


@pytest.mark.slow
@pytest.mark.parametrize("penalty", [{"frequency_penalty": 2.0}, {"repeat_penalty": 1.5}])  # OpenAI's; llama.cpp's
async def test_a_penalty_stops_a_greedy_answer_repeating_itself(engine: LlamaEngine, penalty: dict[str, float]) -> None:
    async def words(**penalty: float) -> list[str]:
        params = SamplingParams(temperature=0.0, max_tokens=30, **penalty)
        done = await collect(engine.stream(GenerationRequest(params=params, prompt="yes, yes, yes, yes, yes,")))
        return done.text.lower().replace(",", " ").split()

    plain, penalized = await words(), await words(**penalty)
    top = max(plain.count(w) for w in plain)
    assert top >= 10  # the model does repeat one word, unpenalized
    assert max(penalized.count(w) for w in penalized) < top / 2
    assert len(set(penalized)) > len(set(plain))


@pytest.mark.slow
async def test_logit_bias_forces_and_bans_tokens_and_an_unknown_id_is_refused(engine: LlamaEngine) -> None:
    from edge import LogitBiasError

    yes = engine._vocab.tokenize(b" yes", False, False)
    assert len(yes) == 1

    async def answer(bias: dict[int, float], **params: object) -> str:
        sampling = SamplingParams(**{"temperature": 0.0, "max_tokens": 3, "logit_bias": tuple(sorted(bias.items())), **params})  # type: ignore[arg-type]
        return (await collect(engine.stream(GenerationRequest(params=sampling, prompt="1, 2, 3, 4,")))).text

    assert await answer({yes[0]: 100.0}) == " yes yes yes"
    assert await answer({yes[0]: 100.0}, temperature=1.0, seed=3) == " yes yes yes"
    plain = await answer({})
    first = engine._vocab.tokenize(plain.encode(), False, False)[0]
    banned = await answer({first: -100.0})
    assert banned != plain and engine._vocab.tokenize(banned.encode(), False, False)[0] != first
    with pytest.raises(LogitBiasError) as caught:
        await answer({10**8: 5.0})
    assert caught.value.param == "logit_bias"


@pytest.mark.slow
async def test_top_k_1_and_min_p_1_sample_only_the_most_likely_token(engine: LlamaEngine) -> None:
    async def text(**fields: float) -> str:
        params = SamplingParams(max_tokens=16, **fields)  # type: ignore[arg-type]
        return (await collect(engine.stream(GenerationRequest(params=params, prompt="The three primary colors are")))).text

    greedy = await text(temperature=0.0)
    hot = [await text(temperature=1.8, seed=seed) for seed in (1, 2, 3)]
    assert len(set(hot)) > 1 and greedy not in hot  # sampled hot, the answers differ
    assert {await text(temperature=1.8, seed=seed, top_k=1) for seed in (1, 2, 3)} == {greedy}
    assert {await text(temperature=1.8, seed=seed, min_p=1.0) for seed in (1, 2, 3)} == {greedy}
