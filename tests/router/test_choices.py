"""``n`` choices through a real node (the real edge model), driven by the openai SDK: each choice
is the answer the same request with ``seed + i`` gets alone, whole and streamed; usage counts the
prompt once; a client that leaves stops every choice; bounds and the Responses API refuse."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from models import Usage
from router.choices import _all, total_usage
from tests.cloud.cloud_servers import chat_chunk, sse
from tests.router.hybrid_helpers import ASK as HASH_ASK
from tests.router.hybrid_helpers import RecordingServer, decisions, node

ASK = [{"role": "user", "content": "Name a fruit."}]
NO_CACHE = {"cache": False}


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.mark.slow
def test_each_choice_is_the_answer_its_seed_gets_alone(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {"model": "edge", "messages": ASK, "max_tokens": 8, "temperature": 1.0, "extra_body": NO_CACHE}
    many = client.chat.completions.create(n=3, seed=7, **kwargs)
    alone = [client.chat.completions.create(seed=7 + i, **kwargs) for i in range(3)]
    assert [c.index for c in many.choices] == [0, 1, 2]
    assert [c.message.content for c in many.choices] == [a.choices[0].message.content for a in alone]
    assert len({c.message.content for c in many.choices}) > 1  # samples, not copies
    assert many.usage is not None and all(a.usage is not None for a in alone)
    assert many.usage.prompt_tokens == alone[0].usage.prompt_tokens  # type: ignore[union-attr]
    assert many.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)  # type: ignore[union-attr]


@pytest.mark.slow
def test_streamed_choices_add_up_to_the_whole_ones(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {"model": "edge", "messages": ASK, "max_tokens": 8, "seed": 11, "n": 3, "extra_body": NO_CACHE}
    whole = client.chat.completions.create(**kwargs)
    texts: dict[int, str] = {}
    finishes: dict[int, list[str]] = {}
    roles: list[int] = []
    usages = []
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        if chunk.usage is not None:
            usages.append(chunk.usage)
        for choice in chunk.choices:
            if choice.delta.role == "assistant":
                roles.append(choice.index)
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finishes.setdefault(choice.index, []).append(choice.finish_reason)
    assert sorted(roles) == [0, 1, 2]
    assert [texts[i] for i in range(3)] == [c.message.content for c in whole.choices]
    assert finishes == {i: [whole.choices[i].finish_reason] for i in range(3)}
    assert len(usages) == 1 and usages[0].completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]


@pytest.mark.slow
def test_text_completions_echo_the_prompt_in_every_choice(client: openai.OpenAI) -> None:
    done = client.completions.create(model="edge", prompt="The sky is", n=2, max_tokens=4, seed=3, echo=True, extra_body=NO_CACHE)
    assert [c.index for c in done.choices] == [0, 1]
    assert all(c.text.startswith("The sky is") and len(c.text) > len("The sky is") for c in done.choices)


def _edge_running(base: str) -> int:
    return int(httpx.get(base + "/healthz", timeout=10).json()["edge"]["running"])


@pytest.mark.slow
def test_a_client_that_leaves_stops_every_choice(node_url: str, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="edge", messages=[{"role": "user", "content": "Tell a long story."}], n=3, max_tokens=400,
        stream=True, extra_body=NO_CACHE,
    )
    for chunk in stream:
        if any(c.delta.content for c in chunk.choices):
            break
    assert _edge_running(node_url) >= 1
    stream.close()
    deadline = time.monotonic() + 30  # polled: the node notices the closed connection at its next write
    while _edge_running(node_url) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _edge_running(node_url) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "edge", "messages": ASK, "n": 9}),
        ("/v1/chat/completions", {"model": "edge", "messages": ASK, "n": 0}),
        ("/v1/responses", {"model": "edge", "input": "hi", "n": 2}),
    ],
)
def test_n_out_of_bounds_or_on_the_responses_api_is_a_400(node_url: str, path: str, body: dict[str, Any]) -> None:
    answer = httpx.post(node_url + path, json=body, timeout=30)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "n"


def test_choice_seeds_stay_64_bit_signed_integers() -> None:
    from models import GenerationRequest, SamplingParams
    from router.choices import fan_out
    from router.record import RequestContext, RequestRecord

    gen = GenerationRequest(SamplingParams(seed=2**63 - 1), prompt="x")
    seeds = [c.gen.params.seed for c in fan_out(RequestRecord(gen, RequestContext(tenant="t")), 3)]
    assert seeds == [2**63 - 1, -(2**63), -(2**63) + 1]


def test_usage_counts_the_prompt_once_and_every_completion() -> None:
    assert total_usage([Usage(10, 3), Usage(10, 5), Usage(10, 0)]) == Usage(10, 8)
    # Two prompts (10 and 4 tokens), n = 2 each: each prompt once.
    assert total_usage([Usage(10, 3), Usage(10, 5), Usage(4, 1), Usage(4, 2)], 2) == Usage(14, 11)


@pytest.mark.slow
def test_several_prompts_are_each_completed_n_times_in_prompt_order(client: openai.OpenAI) -> None:
    prompts = ["The sky is", "One, two, three,"]
    kwargs: dict[str, Any] = {"model": "edge", "max_tokens": 6, "temperature": 1.0, "extra_body": NO_CACHE}
    many = client.completions.create(prompt=prompts, n=2, seed=11, **kwargs)
    alone = [client.completions.create(prompt=p, seed=11 + i, **kwargs) for p in prompts for i in range(2)]
    assert [c.index for c in many.choices] == [0, 1, 2, 3]
    assert [c.text for c in many.choices] == [a.choices[0].text for a in alone]
    assert many.usage is not None and alone[0].usage is not None and alone[2].usage is not None
    assert many.usage.prompt_tokens == alone[0].usage.prompt_tokens + alone[2].usage.prompt_tokens
    assert many.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone if a.usage)
    streamed: dict[int, str] = {}
    for chunk in client.completions.create(prompt=prompts, n=2, seed=11, stream=True, echo=True, **kwargs):
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + c.text
    assert streamed == {i: prompts[i // 2] + many.choices[i].text for i in range(4)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"prompt": ["a"] * 9}, "at most 8 items"),
        ({"prompt": ["a", "b", "c"], "n": 3}, "3 prompts x n 3: at most 8 completions"),
        ({"prompt": []}, "at least 1 item"),
        ({"prompt": [1, "a", 3]}, "a list of token ids or a list of token-id lists"),
        ({"prompt": [[1, 2]] * 9}, "at most 8 items"),
    ],
)
def test_too_many_prompts_or_token_ids_are_a_400(node_url: str, body: dict[str, Any], fragment: str) -> None:
    answer = httpx.post(node_url + "/v1/completions", json={"model": "edge", "max_tokens": 1, **body}, timeout=30)
    assert answer.status_code == 400 and fragment in answer.json()["error"]["message"]


def test_one_choice_failing_to_start_cancels_the_rest_and_undoes_the_started() -> None:
    started: list[str] = []
    undone: list[str] = []
    cancelled: list[str] = []

    async def quick() -> str:
        started.append("quick")
        return "quick"

    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return "slow"

    async def broken() -> str:
        await asyncio.sleep(0.01)
        raise RuntimeError("no capacity")

    async def undo(result: str) -> None:
        undone.append(result)

    with pytest.raises(RuntimeError, match="no capacity"):
        asyncio.run(_all([quick, slow, broken], undo))
    assert (started, cancelled, undone) == (["quick"], ["slow"], ["quick"])


@pytest.mark.slow
def test_each_choice_falls_back_on_its_own_when_the_member_breaks(tmp_path: Path) -> None:
    # The scripted member plays its script to one request at a time (a concurrent one gets an
    # empty answer): one choice breaks mid-stream, the other before its first token.
    stall = RecordingServer([("send", sse(chat_chunk("A hash map"))), ("send", sse(chat_chunk(" stores"))), ("sleep", 30)])
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
            texts: dict[int, str] = {}
            finishes: dict[int, str] = {}
            for chunk in client.chat.completions.create(model="cloud", messages=HASH_ASK, n=2, max_tokens=12, stream=True):  # type: ignore[arg-type]
                for choice in chunk.choices:
                    texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
                    if choice.finish_reason:
                        finishes[choice.index] = choice.finish_reason
            assert sorted(finishes) == [0, 1] and all(texts[i] for i in (0, 1))
            assert any(t.startswith("A hash map stores") for t in texts.values())
            assert [d.fallback for d in decisions(app)[-2:]] == ["cloud->edge", "cloud->edge"]
    finally:
        stall.close()


@pytest.mark.slow
def test_every_choice_of_a_forced_call_is_a_call(client: openai.OpenAI) -> None:
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}},
    }
    done = client.chat.completions.create(
        model="edge", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[weather], tool_choice="required",  # type: ignore[list-item]
        n=2, seed=5, max_tokens=40, extra_body=NO_CACHE,
    )
    assert [c.finish_reason for c in done.choices] == ["tool_calls", "tool_calls"]
    assert all(c.message.tool_calls and c.message.tool_calls[0].function.name == "get_weather" for c in done.choices)
