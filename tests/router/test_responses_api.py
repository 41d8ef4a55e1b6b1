"""``POST /v1/responses`` through a real node (the real edge model), driven by the openai SDK's
Responses client: the same answer as the chat API for the same request, whole and streamed,
structured output, forced function calls and their results, log probabilities, the cache shared
with the chat API, and clear 400s for what the node cannot do (stored responses:
test_responses_store.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.cloud.cloud_servers import chat_chunk, sse
from tests.router.hybrid_helpers import ASK, RecordingServer, decisions, node

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
NO_CACHE = {"cache": False}


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_a_response_is_the_chat_answer_to_the_same_request(client: openai.OpenAI) -> None:
    ask = "Name three primary colors."
    chat = client.chat.completions.create(
        model="edge", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": ask}],
        temperature=0, max_tokens=12, extra_body=NO_CACHE,
    )
    done = client.responses.create(
        model="edge", instructions="Be brief.", input=ask, temperature=0, max_output_tokens=12, extra_body=NO_CACHE
    )
    assert done.object == "response" and done.id.startswith("resp_") and done.model == "edge"
    assert done.output_text == chat.choices[0].message.content
    [item] = done.output
    assert (item.type, item.role, item.id.startswith("msg_")) == ("message", "assistant", True)
    assert chat.usage is not None and done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (chat.usage.prompt_tokens, chat.usage.completion_tokens)
    if chat.choices[0].finish_reason == "length":
        assert (done.status, done.incomplete_details and done.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    else:
        assert (done.status, done.incomplete_details) == ("completed", None)


def test_max_output_tokens_cuts_the_answer_and_says_so(client: openai.OpenAI) -> None:
    done = client.responses.create(model="edge", input="Tell me a long story.", max_output_tokens=3, extra_body=NO_CACHE)
    assert done.status == "incomplete" and done.incomplete_details is not None
    assert done.incomplete_details.reason == "max_output_tokens"
    assert done.usage is not None and done.usage.output_tokens == 3 and done.output_text


def test_a_streamed_response_adds_up_to_the_whole_one(client: openai.OpenAI) -> None:
    # ``stop`` (a chat extension, passed on) ends the greedy answer at its first space.
    kwargs: dict[str, Any] = {
        "model": "edge", "input": "What is the capital of France?", "temperature": 0, "max_output_tokens": 64,
        "extra_body": {**NO_CACHE, "stop": [" "]},
    }
    whole = client.responses.create(**kwargs)
    assert whole.status == "completed"
    types, deltas = [], []
    with client.responses.stream(**kwargs) as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    assert "".join(deltas) == final.output_text == whole.output_text
    assert final.status == "completed" and " " not in final.output_text
    assert final.usage is not None and final.usage.output_tokens >= 1


class City(BaseModel):
    name: str
    country: str


def test_parse_with_a_pydantic_model_gets_matching_json(client: openai.OpenAI) -> None:
    done = client.responses.parse(model="edge", input="Give a city in Japan.", text_format=City, temperature=0, max_output_tokens=80)
    assert done.status == "completed"
    assert isinstance(done.output_parsed, City)
    assert City.model_validate_json(done.output_text) == done.output_parsed


def test_a_forced_call_is_a_function_call_item_and_its_result_can_be_sent_back(client: openai.OpenAI) -> None:
    ask = {"role": "user", "content": "What is the weather in Paris?"}
    done = client.responses.create(
        model="edge", input=[ask], tools=[WEATHER], tool_choice="required", temperature=0, max_output_tokens=60  # type: ignore[list-item]
    )
    [call] = done.output
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id.startswith("call_")
    assert list(json.loads(call.arguments)) == ["city"]
    follow = client.responses.create(
        model="edge",
        input=[ask, call.model_dump(exclude_none=True), {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}],  # type: ignore[list-item]
        temperature=0, max_output_tokens=8,
    )
    assert follow.output[0].type == "message" and follow.output_text


@pytest.mark.parametrize("ask", ["Is it raining in Berlin today?", "What is the capital of France?"])
def test_with_tools_the_output_is_a_function_call_or_a_message_the_same_streamed(client: openai.OpenAI, ask: str) -> None:
    kwargs: dict[str, Any] = {
        "model": "edge", "input": ask, "tools": [WEATHER], "temperature": 0, "max_output_tokens": 40, "extra_body": NO_CACHE,
    }
    [item] = client.responses.create(**kwargs).output
    if item.type == "function_call":
        assert item.name == "get_weather" and list(json.loads(item.arguments)) == ["city"]
    else:
        assert item.type == "message" and item.content[0].text and not item.content[0].text.startswith('{"response"')  # type: ignore[union-attr]
    sent = list(client.responses.create(stream=True, **kwargs))
    [streamed] = sent[-1].response.output  # type: ignore[union-attr]
    assert (streamed.type, getattr(streamed, "arguments", None)) == (item.type, getattr(item, "arguments", None))
    if item.type == "message":
        deltas = "".join(e.delta for e in sent if e.type == "response.output_text.delta")
        assert deltas == streamed.content[0].text == item.content[0].text  # type: ignore[union-attr]
    assert [e.type for e in sent].count("response.output_item.added") == 1


def test_a_named_call_streams_its_arguments(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {
        "model": "edge", "input": "What is the weather in Rome?", "tools": [WEATHER],
        "tool_choice": {"type": "function", "name": "get_weather"}, "temperature": 0, "max_output_tokens": 60,
        "extra_body": NO_CACHE,  # a cache hit would send the arguments in one delta
    }
    whole = client.responses.create(**kwargs).output[0]
    deltas, done = [], None
    for event in client.responses.create(stream=True, **kwargs):
        if event.type == "response.function_call_arguments.delta":
            deltas.append(event.delta)
        elif event.type == "response.function_call_arguments.done":
            done = event.arguments
    assert whole.type == "function_call"
    assert len(deltas) > 1 and "".join(deltas) == done == whole.arguments


def test_log_probabilities_come_with_each_output_token(client: openai.OpenAI) -> None:
    done = client.responses.create(
        model="edge", input="Hi", include=["message.output_text.logprobs"], top_logprobs=2, max_output_tokens=4, temperature=0
    )
    part = done.output[0].content[0]  # type: ignore[union-attr]
    assert part.type == "output_text" and part.logprobs is not None
    assert done.usage is not None and len(part.logprobs) == done.usage.output_tokens
    assert "".join(lp.token for lp in part.logprobs) == part.text
    assert all(len(lp.top_logprobs) == 2 and lp.logprob <= 0 for lp in part.logprobs)


def test_a_chat_answer_in_the_cache_answers_the_same_response_request(node_url: str) -> None:
    ask = "Which planet is known as the red planet? (responses cache test)"
    first = httpx.post(node_url + "/v1/chat/completions", json={"model": "edge", "messages": [{"role": "user", "content": ask}], "temperature": 0, "max_tokens": 6}, timeout=120)
    again = httpx.post(node_url + "/v1/responses", json={"model": "edge", "input": ask, "temperature": 0, "max_output_tokens": 6}, timeout=120)
    assert (first.status_code, again.status_code) == (200, 200)
    assert [first.headers["x-edgeroute-route"], again.headers["x-edgeroute-route"]] == ["edge", "cache-exact"]
    body = again.json()
    assert body["output"][0]["content"][0]["text"] == first.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"background": True}, "background"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]}, "input"),
        ({"text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}, "text.format.name"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, None),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"input": []}, "input"),
    ],
)
def test_what_the_node_cannot_do_is_a_clear_400(node_url: str, extra: dict[str, Any], param: str | None) -> None:
    answer = httpx.post(node_url + "/v1/responses", json={"model": "edge", "input": "hi", **extra}, timeout=30)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_a_response_stream_a_member_breaks_is_finished_on_the_edge_in_one_message(tmp_path: Path) -> None:
    stall = RecordingServer([("send", sse(chat_chunk("A hash map"))), ("send", sse(chat_chunk(" stores"))), ("sleep", 30)])
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
            kinds, deltas, final = [], [], None
            for event in client.responses.create(model="cloud", input=ASK, stream=True, max_output_tokens=16, temperature=0):
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                elif event.type in ("response.completed", "response.incomplete"):
                    final = event.response
            assert final is not None and kinds.count("response.output_item.added") == 1
            assert "".join(deltas) == final.output_text and final.output_text.startswith("A hash map stores")
            assert final.usage is not None and final.usage.output_tokens <= 16
            assert decisions(app)[-1].fallback == "cloud->edge"
    finally:
        stall.close()
