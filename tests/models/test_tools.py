"""Function calls in the OpenAI wire format: the schema an answer generates under for each
``tool_choice``, and how the generated text becomes ``tool_calls`` or an ``auto`` reply (whole and
streamed), including an answer cut short."""

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


def test_only_none_or_no_tools_answer_in_plain_text() -> None:
    assert body("none").tool_use() is None
    assert ChatBody.model_validate({"model": "m", "messages": USER}).tool_use() is None
    assert body(None).tool_use() == body("auto").tool_use()  # OpenAI's default with tools
    assert body("auto").tool_use().auto is True  # type: ignore[union-attr]


def test_required_or_a_named_function_forces_a_call() -> None:
    named = body({"type": "function", "function": {"name": "a"}})
    assert named.sampling().json_schema == '{"type":"object","properties":{"x":{"type":"integer"}}}'
    required = json.loads(body("required").sampling().json_schema or "")
    assert [c["properties"]["name"] for c in required["anyOf"]] == [{"const": "a"}, {"const": "b"}]
    assert required["anyOf"][1]["properties"]["arguments"] == {"type": "object"}  # no parameters: any object
    messages = named.plain_messages()
    assert len(messages) == 2 and messages[0]["content"].startswith("Be brief.\n\nCall the function a.")


def test_whole_answers_become_one_call_or_stay_text_when_cut() -> None:
    required = body("required").tool_use()
    whole = ChunkWriter("chat", "m", call=required).whole('{"name":"a","arguments":{"x": 1}}', "stop", Usage(1, 2))
    [call] = whole["choices"][0]["message"]["tool_calls"]
    assert (call["function"], whole["choices"][0]["finish_reason"]) == ({"name": "a", "arguments": '{"x":1}'}, "tool_calls")
    cut = ChunkWriter("chat", "m", call=required).whole('{"name":"a","argu', "length", Usage(1, 2))
    assert cut["choices"][0]["message"]["content"] == '{"name":"a","argu'
    assert "tool_calls" not in cut["choices"][0]["message"] and cut["choices"][0]["finish_reason"] == "length"


def _events(stream: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in stream.decode().split("\n\n") if line.startswith("data: {")]


def test_a_streamed_required_call_is_sent_once_whole_and_a_cut_one_as_text() -> None:
    required = body("required").tool_use()
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
    writer = ChunkWriter("chat", "m", call=body("required").tool_use(), include_usage=True)
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


def test_auto_generates_either_a_call_or_a_reply_envelope() -> None:
    schema = json.loads(body("auto").sampling().json_schema or "")
    call, reply = schema["anyOf"]
    assert call["required"] == ["tool_call"] and [c["properties"]["name"] for c in call["properties"]["tool_call"]["anyOf"]] == [{"const": "a"}, {"const": "b"}]
    assert reply == {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"], "additionalProperties": False}
    with_format = ChatBody.model_validate(
        {"model": "m", "messages": USER, "tools": TOOLS, "response_format": {"type": "json_object"}}
    )
    assert json.loads(with_format.sampling().json_schema or "")["anyOf"][1]["properties"]["response"] == {"type": "object"}
    system = body("auto").plain_messages()[0]["content"]
    assert system.startswith("Be brief.\n\nYou can call these functions:\n- a (arguments:") and '{"response":' in system


def test_a_whole_auto_answer_is_a_call_or_the_reply_inside_its_envelope() -> None:
    auto = body("auto").tool_use()
    called = ChunkWriter("chat", "m", call=auto).whole('{"tool_call": {"name": "a", "arguments": {"x": 2}}}', "stop", Usage(1, 2))
    [call] = called["choices"][0]["message"]["tool_calls"]
    assert (call["function"], called["choices"][0]["finish_reason"]) == ({"name": "a", "arguments": '{"x":2}'}, "tool_calls")
    assert called["choices"][0]["message"]["content"] is None
    replied = ChunkWriter("chat", "m", call=auto).whole('{"response": "Hi \\"you\\"\\n"}', "stop", Usage(1, 2))
    assert replied["choices"][0]["message"] == {"role": "assistant", "content": 'Hi "you"\n', "refusal": None}
    assert replied["choices"][0]["finish_reason"] == "stop"
    cut = ChunkWriter("chat", "m", call=auto).whole('{"response": "Hi th', "length", Usage(1, 2))
    assert (cut["choices"][0]["message"]["content"], cut["choices"][0]["finish_reason"]) == ("Hi th", "length")
    # Cut before the envelope says what it is, or text that is no envelope: the text as it is.
    for text in ('{"tool_call": {"name": "a", "argu', "plain words"):
        assert ChunkWriter("chat", "m", call=auto).whole(text, "length", Usage(1, 2))["choices"][0]["message"]["content"] == text


def test_an_auto_reply_streams_as_it_grows_and_a_call_comes_whole() -> None:
    auto = body("auto").tool_use()
    writer = ChunkWriter("chat", "m", call=auto)
    pieces = ['{"resp', 'onse": "Ca', "f\\u00", 'e9 \\ud83d', '\\ude00 ok"', "}"]
    events = _events(writer.opening() + b"".join(writer.text(p) for p in pieces) + writer.finish("stop", Usage(1, 2)))
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [e["choices"][0]["delta"].get("content") for e in events[1:-1]] == ["Ca", "f", "é ", "😀 ok"]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    writer = ChunkWriter("chat", "m", call=auto)
    pieces = ['{"tool_call": {"name": "b", ', '"arguments": {}}}']
    events = _events(writer.opening() + b"".join(writer.text(p) for p in pieces) + writer.finish("stop", Usage(1, 2)))
    assert len(events) == 3 and events[1]["choices"][0]["delta"]["tool_calls"][0]["function"] == {"name": "b", "arguments": "{}"}
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    writer = ChunkWriter("chat", "m", call=auto)
    events = _events(writer.opening() + writer.text('{"tool_call": {"na') + writer.finish("length", Usage(1, 2)))
    assert events[1]["choices"][0]["delta"] == {"content": '{"tool_call": {"na'} and events[-1]["choices"][0]["finish_reason"] == "length"


def test_a_json_reply_under_response_format_is_sent_whole_at_the_end() -> None:
    auto = ChatBody.model_validate(
        {"model": "m", "messages": USER, "tools": TOOLS, "response_format": {"type": "json_object"}}
    ).tool_use()
    writer = ChunkWriter("chat", "m", call=auto)
    out = writer.opening() + writer.text('{"response": {"k": ') + writer.text('[1, 2]}}')
    events = _events(out + writer.finish("stop", Usage(1, 2)))
    assert [e["choices"][0]["delta"].get("content") for e in events[1:-1]] == ['{"k":[1,2]}']
