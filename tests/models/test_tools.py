"""Forced function calls in the OpenAI wire format: the schema they generate under, and how the
generated text becomes ``tool_calls`` (whole and streamed), including an answer cut short."""

from __future__ import annotations

import json

from models.generation import TokenLogprob, Usage
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


def test_interleaved_choices_keep_their_own_calls_and_only_the_last_finish_closes_the_stream() -> None:
    writer = ChunkWriter("chat", "m", call=body("required").forced_call(), include_usage=True)
    out = writer.opening(2) + writer.text('{"name":"a",', index=0) + writer.text('{"name":"b",', index=1)
    out += writer.text('"arguments":{"x":1}}', index=0) + writer.finish("stop", Usage(5, 3), index=0, last=False)
    assert not out.endswith(b"data: [DONE]\n\n")
    out += writer.text('"arguments":{}}', index=1) + writer.finish("stop", Usage(5, 7), index=1)
    events = _events(out)
    assert [e["choices"][0]["index"] for e in events[:2]] == [0, 1]
    calls = {e["choices"][0]["index"]: e["choices"][0]["delta"]["tool_calls"][0]["function"] for e in events if e["choices"] and "tool_calls" in e["choices"][0]["delta"]}
    assert calls == {0: {"name": "a", "arguments": '{"x":1}'}, 1: {"name": "b", "arguments": "{}"}}
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 7
    assert out.count(b"data: [DONE]") == 1


def test_text_offsets_of_log_probabilities_count_within_each_choice() -> None:
    writer = ChunkWriter("text", "m", logprobs=True)
    first = writer.whole_choices(
        [("ab", "stop", [TokenLogprob("a", -1.0, b"a"), TokenLogprob("b", -1.0, b"b")]), ("c", "stop", [TokenLogprob("c", -1.0, b"c")])],
        Usage(1, 3),
    )
    assert [c["logprobs"]["text_offset"] for c in first["choices"]] == [[0, 1], [0]]
