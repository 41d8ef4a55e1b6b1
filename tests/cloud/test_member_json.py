"""``response_format`` on the member server (1 rank, real model over HTTP): JSON by construction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cloud.local import LocalMember

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}
BAD_REF = {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}  # llguidance cannot resolve it
LEGS = [{"role": "user", "content": "How many legs does a dog have? Answer in JSON."}]


@pytest.fixture(scope="module")
def http(member: LocalMember) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as client:
        yield client


def _chat(http: httpx.Client, member: LocalMember, **fields: Any) -> dict[str, Any]:
    resp = http.post("/v1/chat/completions", json={"model": member.model, "max_tokens": 200, **fields})
    assert resp.status_code == 200, resp.text
    choice: dict[str, Any] = resp.json()["choices"][0]
    return choice


def _is_answer(value: Any) -> bool:
    return isinstance(value, dict) and list(value) == ["answer"] and type(value["answer"]) is int


def test_json_object_streamed_and_whole(http: httpx.Client, member: LocalMember) -> None:
    messages = [{"role": "user", "content": "What is the capital of France? Answer in JSON."}]
    body = {"messages": messages, "temperature": 0, "response_format": {"type": "json_object"}}
    whole = _chat(http, member, **body)
    assert isinstance(json.loads(whole["message"]["content"]), dict)
    assert whole["finish_reason"] == "stop"
    pieces: list[str] = []
    finish = None
    stream_body = {"model": member.model, "max_tokens": 200, "stream": True, **body}
    with http.stream("POST", "/v1/chat/completions", json=stream_body) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                choice = json.loads(line[6:])["choices"][0]
                pieces.append(choice["delta"].get("content") or "")
                finish = choice["finish_reason"] or finish
    assert "".join(pieces) == whole["message"]["content"] and finish == "stop"


# Sampled, an unbounded integer may run to max_tokens in digits (seed 7 does): the schema bounds it.
BOUNDED = {**ANSWER, "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 999}}}


@pytest.mark.parametrize(
    ("schema", "sampling"),
    [(ANSWER, {"temperature": 0}), (BOUNDED, {"temperature": 1.0, "seed": 7})],
    ids=["greedy", "sampled"],
)
def test_json_schema_greedy_and_sampled(
    http: httpx.Client, member: LocalMember, schema: dict[str, Any], sampling: dict[str, Any]
) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    choice = _chat(http, member, messages=LEGS, response_format=response_format, **sampling)
    assert _is_answer(json.loads(choice["message"]["content"]))
    assert choice["finish_reason"] == "stop"


def test_continuation_completes_the_same_json(http: httpx.Client, member: LocalMember) -> None:
    prefix = '{"answer":'  # compact, as both engines write JSON
    choice = _chat(
        http,
        member,
        messages=[*LEGS, {"role": "assistant", "content": prefix}],
        continue_final_message=True,
        add_generation_prompt=False,
        temperature=0,
        response_format=SCHEMA_FORMAT,
    )
    assert _is_answer(json.loads(prefix + choice["message"]["content"]))


@pytest.mark.parametrize(
    "fields",
    [
        {"response_format": {"type": "json_schema", "json_schema": {"name": "bad", "schema": BAD_REF}}},
        {  # a continuation the schema cannot extend
            "response_format": SCHEMA_FORMAT,
            "messages": [*LEGS, {"role": "assistant", "content": '{"nope":'}],
            "continue_final_message": True,
            "add_generation_prompt": False,
        },
    ],
    ids=["unknown-ref", "bad-prefix"],
)
def test_refused_grammar_is_an_openai_400(
    http: httpx.Client, member: LocalMember, fields: dict[str, Any]
) -> None:
    resp = http.post("/v1/chat/completions", json={"model": member.model, "messages": LEGS, **fields})
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["param"] == "response_format" and error["type"] == "invalid_request_error"
    assert error["message"].startswith("response_format: ")


def test_either_engine_continues_the_others_json(http: httpx.Client, member: LocalMember) -> None:
    """A fallback between the edge (llama.cpp grammar) and a member (llguidance) mid-answer: both
    write the same compact JSON, so each accepts the other's partial answer and completes it."""
    import asyncio

    from edge import EdgeSettings, LlamaEngine
    from models import EDGE_DEFAULT, GenerationRequest, SamplingParams, collect, default_models_dir, resolve

    schema = json.dumps(ANSWER, separators=(",", ":"))
    params = SamplingParams(temperature=0.0, max_tokens=40, json_schema=schema)

    async def on_the_edge(prefix: str) -> str:
        engine = LlamaEngine(resolve(EDGE_DEFAULT, default_models_dir()), EdgeSettings(n_ctx=512, slots=1))
        try:
            done = await collect(engine.stream(GenerationRequest(params=params, messages=tuple(LEGS), assistant_prefix=prefix)))
        finally:
            await engine.aclose()
        return done.text

    edge_answer = asyncio.run(on_the_edge(""))
    cut = edge_answer[: len('{"answer":')]
    assert cut == '{"answer":'
    member_rest = _chat(
        http, member, messages=[*LEGS, {"role": "assistant", "content": cut}], continue_final_message=True,
        add_generation_prompt=False, temperature=0, response_format=SCHEMA_FORMAT,
    )["message"]["content"]
    assert _is_answer(json.loads(cut + member_rest))

    member_answer = _chat(http, member, messages=LEGS, temperature=0, response_format=SCHEMA_FORMAT)["message"]["content"]
    cut = member_answer[:-1]  # all but the closing brace
    assert _is_answer(json.loads(cut + asyncio.run(on_the_edge(cut))))


def test_a_forced_call_comes_back_as_a_tool_call(http: httpx.Client, member: LocalMember) -> None:
    tool = {"type": "function", "function": {"name": "count_legs", "parameters": ANSWER}}
    choice = _chat(
        http, member, messages=LEGS, temperature=0, tools=[tool],
        tool_choice={"type": "function", "function": {"name": "count_legs"}},
    )
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "count_legs"
    assert _is_answer(json.loads(call["function"]["arguments"]))


def test_an_object_that_lists_its_properties_gets_no_others(http: httpx.Client, member: LocalMember) -> None:
    """Without ``additionalProperties`` a schema allows extra keys; both engines close such
    objects (llama.cpp's converter does, so the member does too), so the tool's keys are all."""
    open_schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": open_schema}}
    choice = _chat(
        http, member, messages=[{"role": "user", "content": "Weather in Rome?"}], temperature=0, max_tokens=40,
        tools=[tool], tool_choice="required",
    )
    [call] = choice["message"]["tool_calls"]
    assert list(json.loads(call["function"]["arguments"])) == ["city"]


@pytest.mark.parametrize("ask", ["What is the weather in Rome?", "How many legs does a dog have?"])
def test_with_tools_and_no_tool_choice_the_member_calls_or_replies_by_the_same_grammar(
    http: httpx.Client, member: LocalMember, ask: str
) -> None:
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}}}
    body = {"messages": [{"role": "user", "content": ask}], "temperature": 0, "max_tokens": 40, "tools": [tool]}
    choice = _chat(http, member, **body)
    message = choice["message"]
    if message.get("tool_calls"):
        [call] = message["tool_calls"]
        assert (choice["finish_reason"], message["content"], call["function"]["name"]) == ("tool_calls", None, "get_weather")
        assert list(json.loads(call["function"]["arguments"])) == ["city"]
    else:
        assert message["content"] and not message["content"].startswith('{"response"')
    with http.stream("POST", "/v1/chat/completions", json={"model": member.model, "stream": True, **body}) as resp:
        events = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: {")]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    streamed_calls = [t["function"] for d in deltas for t in d.get("tool_calls") or ()]
    assert "".join(d.get("content") or "" for d in deltas) == (message["content"] or "")
    assert streamed_calls == [c["function"] for c in message.get("tool_calls") or ()]
