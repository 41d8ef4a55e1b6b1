"""Function calls through a real node, driven by the openai SDK: forced (``tool_choice``
``"required"`` or named) or chosen by the model (``"auto"``, the default with tools); a call is
generated under its JSON Schema, so it parses and matches."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 40}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": -999, "maximum": 999}, "b": {"type": "integer", "minimum": -999, "maximum": 999}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _matches(name: str, arguments: dict[str, Any]) -> bool:
    if name == "get_weather":
        return list(arguments) == ["city"] and isinstance(arguments["city"], str)
    return name == "add" and list(arguments) == ["a", "b"] and all(type(v) is int for v in arguments.values())


@pytest.mark.parametrize("choice", [NAMED, "required"], ids=["named", "required"])
def test_a_forced_call_is_a_tool_call_matching_its_function(client: openai.OpenAI, choice: Any) -> None:
    done = client.chat.completions.create(
        model="edge", messages=ASK, tools=[WEATHER, ADD], tool_choice=choice, temperature=0, max_tokens=60  # type: ignore[list-item,arg-type]
    )
    message = done.choices[0].message
    assert done.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    assert message.tool_calls is not None and len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert _matches(call.function.name, json.loads(call.function.arguments))
    if choice == NAMED:
        assert call.function.name == "get_weather"


@pytest.mark.parametrize("choice", [NAMED, "required"], ids=["named", "required"])
def test_a_streamed_forced_call_adds_up_to_the_same_call(client: openai.OpenAI, choice: Any) -> None:
    kwargs: dict[str, Any] = {"model": "edge", "messages": ASK, "tools": [WEATHER, ADD], "tool_choice": choice, "temperature": 0, "max_tokens": 60}
    whole = client.chat.completions.create(**kwargs).choices[0].message.tool_calls[0]  # type: ignore[index]
    name, arguments, ids, finish = "", "", set(), None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        choice0 = chunk.choices[0]
        finish = choice0.finish_reason or finish
        assert not choice0.delta.content
        for part in choice0.delta.tool_calls or ():
            assert part.index == 0
            ids.add(part.id) if part.id else None
            name += (part.function.name or "") if part.function else ""
            arguments += (part.function.arguments or "") if part.function else ""
    assert finish == "tool_calls" and len(ids) == 1
    assert (name, json.loads(arguments)) == (whole.function.name, json.loads(whole.function.arguments))


class Weather(BaseModel):
    city: str


def test_the_sdks_parse_reads_the_arguments_into_the_model(client: openai.OpenAI) -> None:
    tool = openai.pydantic_function_tool(Weather, name="get_weather")  # strict, as the SDK sends it
    done = client.chat.completions.parse(
        model="edge", messages=ASK, tools=[tool], tool_choice=NAMED, temperature=0, max_tokens=60  # type: ignore[arg-type]
    )
    parsed = done.choices[0].message.tool_calls[0].function.parsed_arguments  # type: ignore[index]
    assert isinstance(parsed, Weather)


def test_none_answers_in_text(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(
        model="edge", messages=ASK, tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=20  # type: ignore[list-item]
    )
    assert done.choices[0].message.tool_calls is None
    assert done.choices[0].message.content


def _answer(message: Any) -> tuple[str, Any]:
    """What an ``auto`` answer is: a call (its function and arguments) or a text reply."""
    if message.tool_calls:
        [call] = message.tool_calls
        assert message.content in (None, "")
        arguments = json.loads(call.function.arguments)
        assert _matches(call.function.name, arguments)
        return "call", (call.function.name, arguments)
    assert message.content and not message.content.lstrip().startswith('{"response"')
    return "reply", message.content


@pytest.mark.parametrize("question", ["What is the weather in Paris?", "Add 17 and 25.", "Is it raining in Berlin today?", "Tell me a joke."])
def test_auto_answers_with_a_matching_call_or_a_plain_reply_the_same_whole_and_streamed(
    client: openai.OpenAI, question: str
) -> None:
    kwargs: dict[str, Any] = {
        "model": "edge", "messages": [{"role": "user", "content": question}], "tools": [WEATHER, ADD],
        "temperature": 0, "max_tokens": 60, "extra_body": {"cache": False},  # both generated, not replayed
    }
    whole = client.chat.completions.create(**kwargs).choices[0]
    kind, value = _answer(whole.message)
    assert whole.finish_reason == ("tool_calls" if kind == "call" else whole.finish_reason)
    assert kind == "call" or whole.finish_reason in ("stop", "length")
    content, name, arguments, finish = "", "", "", None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        delta = chunk.choices[0].delta
        finish = chunk.choices[0].finish_reason or finish
        content += delta.content or ""
        for part in delta.tool_calls or ():
            name += part.function.name or "" if part.function else ""
            arguments += part.function.arguments or "" if part.function else ""
    streamed = ("call", (name, json.loads(arguments))) if name else ("reply", content)
    assert (streamed, finish) == ((kind, value), whole.finish_reason)
    assert content == (value if kind == "reply" else "")


def test_a_conversation_with_a_call_and_its_result_goes_on(client: openai.OpenAI) -> None:
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
    ]
    done = client.chat.completions.create(model="edge", messages=history, tools=[WEATHER], temperature=0, max_tokens=20)  # type: ignore[arg-type,list-item]
    _answer(done.choices[0].message)
    done = client.chat.completions.create(model="edge", messages=history, temperature=0, max_tokens=20)  # type: ignore[arg-type]
    assert done.choices[0].message.content


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "add"}}}, "not in tools"),
        ({"tool_choice": "required"}, "needs at least one tool"),
        ({"tools": [WEATHER, WEATHER], "tool_choice": "required"}, "its own name"),
        ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools.0.function.name"),
    ],
)
def test_a_call_that_cannot_be_made_is_a_400(node_url: str, fields: dict[str, Any], says: str) -> None:
    response = httpx.post(node_url + "/v1/chat/completions", json={"model": "edge", "messages": ASK, **fields}, timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert says in error["message"] or says == error["param"]
