"""Every generation feature the node sends to a cloud member, through the pool client, against the
real vLLM member (the one the node starts by default): what vLLM answers is what the node relies on."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
import pytest
from cloud_servers import agree_until_tie, llama_settings

from cloud import CloudPool, PoolSettings
from cloud.local import LocalMember, ServerProcess
from models import Chunk, GenerationRequest, SamplingParams, collect
from models.openai.tools import FunctionDef, ToolUse

COLORS = ({"role": "user", "content": "Name three colors."},)
FRANCE = ({"role": "user", "content": "What is the capital of France?"},)


def ask(messages: tuple[dict[str, str], ...] = COLORS, **params: object) -> GenerationRequest:
    base: dict[str, object] = {"max_tokens": 12, "temperature": 0.0}
    return GenerationRequest(SamplingParams(**{**base, **params}), messages=messages)  # type: ignore[arg-type]


async def chunks_of(member: LocalMember, request: GenerationRequest, *, whole: bool = False) -> list[Chunk]:
    settings = PoolSettings(health_interval_s=0, first_token_timeout_s=120, stall_timeout_s=60)
    async with CloudPool(settings, members=[member.settings]) as pool:
        return [c async for c in pool.stream(request, whole=whole)]


def text(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks)


async def test_a_stream_ends_with_usage_and_counts_the_prompt_as_llama_cpp_does(
    member: LocalMember, llama: ServerProcess
) -> None:
    """The twin's tokenizer reads a chat prompt as the edge model's llama.cpp does (same template,
    no extra BOS): both count the same prompt tokens."""
    chunks = await chunks_of(member, ask(FRANCE, max_tokens=5))
    final = chunks[-1]
    assert final.finish_reason == "length" and final.usage is not None
    assert final.usage.completion_tokens == 5
    settings = PoolSettings(health_interval_s=0, first_token_timeout_s=120)
    async with CloudPool(settings, members=[llama_settings(llama)]) as pool:
        (llama_answer,) = [c async for c in pool.stream(ask(FRANCE, max_tokens=5), whole=True)]
    assert llama_answer.usage is not None
    assert final.usage.prompt_tokens == llama_answer.usage.prompt_tokens == 37


async def test_text_is_decoded_as_text_not_byte_level_symbols(member: LocalMember) -> None:
    answer = text(await chunks_of(member, ask()))
    assert answer.startswith("1. Red\n2. Blue")
    assert not any(symbol in answer for symbol in ("Ġ", "Ċ", "<|im_end|>"))


async def test_a_stop_sequence_ends_the_answer_and_is_reported(member: LocalMember) -> None:
    chunks = await chunks_of(member, ask(stop=("Blue",), max_tokens=30))
    assert text(chunks) == "1. Red\n2. "
    assert (chunks[-1].finish_reason, chunks[-1].stop_word) == ("stop", "Blue")
    # The model's own end (<|im_end|>) is a stop with no stop word.
    whole = await chunks_of(member, ask(max_tokens=60))
    assert (whole[-1].finish_reason, whole[-1].stop_word) == ("stop", None)
    assert text(whole).endswith("Green")


async def test_a_json_schema_constrains_the_answer(member: LocalMember) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    request = ask(({"role": "user", "content": "Give a person as JSON"},), max_tokens=60,
                  json_schema=json.dumps(schema, separators=(",", ":")))
    (answer,) = await chunks_of(member, request, whole=True)
    value = json.loads(answer.text)
    assert sorted(value) == ["age", "name"]
    assert isinstance(value["name"], str) and isinstance(value["age"], int)


WEATHER = FunctionDef(
    name="get_weather",
    description="The current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


@pytest.mark.parametrize("use", [ToolUse((WEATHER,), named="get_weather"), ToolUse((WEATHER,)), ToolUse((WEATHER,), auto=True)],
                         ids=["named", "required", "auto"])
async def test_tool_calls_are_generated_under_their_envelope(member: LocalMember, use: ToolUse) -> None:
    """The node turns tools into a JSON Schema (a call's arguments, a call, or auto's envelope of a
    call or a reply) and an instruction: vLLM's structured output keeps every answer parseable."""
    messages = ({"role": "system", "content": use.instruction()}, {"role": "user", "content": "Weather in Paris?"})
    (answer,) = await chunks_of(member, ask(messages, max_tokens=60, json_schema=use.schema()), whole=True)
    assert answer.finish_reason == "stop"  # whole, not cut by max_tokens
    calls = use.calls(answer.text)
    if use.auto and calls is None:
        assert json.loads(answer.text).keys() == {"response"}
    else:
        assert calls is not None and [c["function"]["name"] for c in calls] == ["get_weather"]
        assert isinstance(json.loads(calls[0]["function"]["arguments"])["city"], str)


async def test_logprobs_come_with_each_token_and_their_alternatives(member: LocalMember) -> None:
    chunks = await chunks_of(member, ask(max_tokens=4, logprobs=3))
    tokens = [lp for c in chunks for lp in c.logprobs]
    assert len(tokens) == 4
    assert "".join(t.token for t in tokens) == text(chunks)
    for t in tokens:
        assert len(t.top) == 3 and t.logprob <= 0
        assert t.top[0].logprob == pytest.approx(t.logprob)  # greedy: the chosen token is the likeliest


async def test_the_member_answers_only_the_node_that_started_it(member: LocalMember) -> None:
    """The node starts its member with a key of its own: another process on the host that calls the
    member directly meets 401, as the node's own clients would without a tenant key."""
    body = {"model": member.model, "prompt": "The sky is", "max_tokens": 1}
    key = {"authorization": f"Bearer {member.settings.api_key}"}
    async with httpx.AsyncClient(base_url=member.settings.root_url, timeout=30) as http:
        for headers in ({}, {"authorization": "Bearer not-the-key"}, {"authorization": member.settings.api_key}):
            assert (await http.post("/v1/completions", json=body, headers=headers)).status_code == 401
            assert (await http.get("/v1/models", headers=headers)).status_code == 401
            # Paths vLLM's own key check leaves open: SageMaker's entry runs a completion.
            assert (await http.post("/invocations", json=body, headers=headers)).status_code == 401
            assert (await http.post("/tokenize", json=body, headers=headers)).status_code == 401
        assert (await http.post("/v1/completions", json=body, headers=key)).status_code == 200
        assert (await http.post("/invocations", json=body, headers=key)).status_code == 200
        # What a pool probes stays open.
        assert [(await http.get(path)).status_code for path in ("/health", "/metrics")] == [200, 200]
    assert len(member.settings.api_key or "") >= 32
    assert member.settings.api_key != LocalMember(name="another").settings.api_key  # a key per launch


async def test_a_seed_repeats_a_sampled_answer(member: LocalMember) -> None:
    sampled = ask(temperature=1.0, seed=1234, max_tokens=16)
    first, again = [text(await chunks_of(member, sampled)) for _ in range(2)]
    assert first == again != ""


async def test_top_k_1_and_min_p_1_sample_the_greedy_answer(member: LocalMember) -> None:
    """Keeping only the likeliest token samples the greedy answer at any temperature: the same tokens,
    up to a tie of the two likeliest (where greedy and top-k may break it differently)."""

    def sky(**params: object) -> GenerationRequest:
        return GenerationRequest(SamplingParams(**{"max_tokens": 8, **params}), prompt="The sky is")  # type: ignore[arg-type]

    def tokens(chunks: list[Chunk]) -> list[tuple[str, dict[str, float]]]:
        return [(t.token, {a.token: a.logprob for a in t.top}) for c in chunks for t in c.logprobs]

    greedy = tokens(await chunks_of(member, sky(temperature=0.0, logprobs=2)))
    assert len(greedy) == 8 and "".join(t for t, _ in greedy).startswith(" a canvas of")
    for i, narrowed in enumerate([{"top_k": 1}, {"min_p": 1.0}, {"top_p": 0.0}]):
        sampled = tokens(await chunks_of(member, sky(temperature=1.5, seed=i + 1, logprobs=2, **narrowed)))
        agree_until_tie(greedy, sampled)
    sampled = text(await chunks_of(member, sky(temperature=1.5, seed=4)))
    assert sampled != "".join(t for t, _ in greedy)  # sampling does sample


async def test_penalties_reach_the_sampler(member: LocalMember) -> None:
    """A greedy answer that repeats itself changes under each penalty (vLLM's repetition_penalty
    carries the node's repeat_penalty)."""
    story = ({"role": "user", "content": "Write a long story about a dragon."},)
    plain = text(await chunks_of(member, ask(story, max_tokens=48)))
    assert plain.count(" the ") + plain.count(" a ") >= 2  # its words repeat
    penalties = ({"frequency_penalty": 2.0}, {"presence_penalty": 2.0}, {"repeat_penalty": 2.0})
    # Side by side: vLLM decodes the three in one batch (one after another took 3x as long).
    answers = await asyncio.gather(*(chunks_of(member, ask(story, max_tokens=48, **p)) for p in penalties))
    for params, chunks in zip(penalties, answers, strict=True):
        assert text(chunks) != plain, params


async def test_logit_bias_is_by_the_edge_models_token_ids(member: LocalMember) -> None:
    """The twin keeps the GGUF's vocabulary: a bias on the id llama.cpp gives "1" steers vLLM too."""
    key = {"authorization": f"Bearer {member.settings.api_key}"}
    async with httpx.AsyncClient(base_url=member.settings.root_url, headers=key, timeout=30) as http:
        ids = (await http.post("/tokenize", json={"model": member.model, "prompt": "1"})).json()["tokens"]
    (one,) = ids
    plain = text(await chunks_of(member, ask(max_tokens=3)))
    assert plain.startswith("1")
    banned = text(await chunks_of(member, ask(max_tokens=3, logit_bias=((one, -100.0),))))
    assert not banned.startswith("1")


async def test_a_continuation_reads_its_prefix_as_the_answer_so_far(member: LocalMember) -> None:
    full = text(await chunks_of(member, ask()))
    prefix = full[: full.index("\n") + 1]
    rest = text(await chunks_of(member, replace(ask(), assistant_prefix=prefix)))
    assert prefix + rest == full


async def test_a_text_completion_streams_with_logprobs(member: LocalMember) -> None:
    request = GenerationRequest(SamplingParams(max_tokens=3, temperature=0.0, logprobs=2), prompt="The sky is")
    chunks = await chunks_of(member, request)
    assert [t.token for c in chunks for t in c.logprobs] == [" a", " canvas", " of"]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 3
