"""Forced function calls in the OpenAI wire format: the schema they generate under, and how the
generated text becomes ``tool_calls`` (whole and streamed), including an answer cut short."""

from __future__ import annotations

import json

from models.generation import Usage
from models.openai.schemas import ChatBody
from models.openai.stream import ChunkWriter

TOOLS = [
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "b"}},
]
USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def body(choice: object) -> ChatBody:
    return ChatBody.model_validate({"model": "m", "messages": USER, "tools": TOOLS, "tool_choice": choice})


def test_only_required_or_a_named_function_forces_a_call() -> None:
    assert body("auto").forced_call() is None and body("none").forced_call() is None
    named = body({"type": "function", "function": {"name": "a"}})
    assert named.sampling().json_schema == '{"type":"object","properties":{"x":{"type":"integer"}}}'
    required = json.loads(body("required").sampling().json_schema or "")
    assert [c["properties"]["name"] for c in required["anyOf"]] == [{"const": "a"}, {"const": "b"}]
    assert required["anyOf"][1]["properties"]["arguments"] == {"type": "object"}  # no parameters: any object
    messages = named.plain_messages()
    assert len(messages) == 2 and messages[0]["content"].startswith("Be brief.\n\nCall the function a.")


def test_whole_answers_become_one_call_or_stay_text_when_cut() -> None:
    required = body("required").forced_call()
    whole = ChunkWriter("chat", "m", call=required).whole('{"name":"a","arguments":{"x": 1}}', "stop", Usage(1, 2))
    [call] = whole["choices"][0]["message"]["tool_calls"]
    assert (call["function"], whole["choices"][0]["finish_reason"]) == ({"name": "a", "arguments": '{"x":1}'}, "tool_calls")
    cut = ChunkWriter("chat", "m", call=required).whole('{"name":"a","argu', "length", Usage(1, 2))
    assert cut["choices"][0]["message"]["content"] == '{"name":"a","argu'
    assert "tool_calls" not in cut["choices"][0]["message"] and cut["choices"][0]["finish_reason"] == "length"


def _events(stream: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in stream.decode().split("\n\n") if line.startswith("data: {")]


def test_a_streamed_required_call_is_sent_once_whole_and_a_cut_one_as_text() -> None:
    required = body("required").forced_call()
    writer = ChunkWriter("chat", "m", call=required)
    out = writer.opening() + writer.text('{"name":"b",') + writer.text('"arguments":{}}') + writer.finish("stop", Usage(1, 2))
    events = _events(out)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert events[1]["choices"][0]["delta"]["tool_calls"][0]["function"] == {"name": "b", "arguments": "{}"}
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    writer = ChunkWriter("chat", "m", call=required)
    events = _events(writer.opening() + writer.text('{"name":"b",') + writer.finish("length", Usage(1, 2)))
    assert events[1]["choices"][0]["delta"] == {"content": '{"name":"b",'}
    assert events[-1]["choices"][0]["finish_reason"] == "length"
