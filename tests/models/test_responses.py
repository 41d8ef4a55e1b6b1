"""The Responses API's wire format: a request read as the chat completion it asks for, and the
response object and event stream written from an answer (whole, cut, a forced call, a failure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from models.generation import TokenLogprob, Usage
from models.openai.response_writer import ResponseWriter
from models.openai.responses import ResponsesBody
from models.openai.schemas import ChatBody
from models.openai.tools import FunctionDef, ToolUse

TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def body(**fields: Any) -> ResponsesBody:
    return ResponsesBody.model_validate({"model": "m", **fields})


def events(raw: bytes) -> list[dict[str, Any]]:
    """Each ``event:``/``data:`` pair of a stream, checked to agree, as the data's JSON."""
    out = []
    for block in raw.decode().split("\n\n"):
        if block:
            name, data = block.split("\n")
            assert name.startswith("event: ") and data.startswith("data: ")
            body = json.loads(data.removeprefix("data: "))
            assert body["type"] == name.removeprefix("event: ")
            out.append(body)
    return out


def test_a_string_input_is_one_user_message_after_the_instructions() -> None:
    assert body(input="hi", instructions="Be brief.").chat_fields()["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_input_items_become_the_chat_conversation() -> None:
    items = [
        {"role": "developer", "content": "Use tools."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "in Paris?"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "It is sunny."}]},
    ]
    chat = ChatBody.model_validate(body(input=items).chat_fields())
    assert chat.plain_messages() == (
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": '[{"name": "get_weather", "arguments": "{\\"city\\":\\"Paris\\"}"}]'},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    )


def test_the_request_s_settings_become_the_chat_body_s() -> None:
    request = body(
        input="hi", max_output_tokens=7, temperature=0.5, top_p=0.9, tools=[TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        include=["message.output_text.logprobs"], top_logprobs=3,
    )
    chat = ChatBody.model_validate(request.chat_fields())
    params = chat.sampling()
    assert (params.max_tokens, params.temperature, params.top_p, params.logprobs) == (7, 0.5, 0.9, 3)
    assert params.json_schema == '{"type":"object","properties":{"city":{"type":"string"}}}'
    assert chat.tool_use() == ToolUse((FunctionDef(name="get_weather", parameters=TOOL["parameters"]),), "get_weather")


def test_text_format_json_schema_is_the_chat_response_format() -> None:
    fmt = {"type": "json_schema", "name": "city", "schema": {"type": "object", "properties": {"name": {"type": "string"}}}, "strict": True}
    chat = ChatBody.model_validate(body(input="hi", text={"format": fmt}).chat_fields())
    assert chat.sampling().json_schema == '{"type":"object","properties":{"name":{"type":"string"}}}'
    assert ChatBody.model_validate(body(input="hi", text={"format": {"type": "json_object"}}).chat_fields()).sampling().json_schema == '{"type":"object"}'
    assert body(input="hi", text={"format": fmt}).echo()["text"] == {"format": fmt}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"conversation": "conv_1"}, ("conversation",)),
        ({"background": True}, ("background",)),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, ("input", 0)),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]}, ("input", 0, "message", "content", 0, "type")),
        ({"tools": [{"type": "web_search"}]}, ("tools", 0, "type")),
    ],
)
def test_conversations_background_jobs_references_and_other_media_are_refused(fields: dict[str, Any], where: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        body(**{"input": "hi", **fields})
    # pydantic names the union's branch in the location ("list[...]", "str"); the node's errors drop it
    locs = [tuple(p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or p == "str"))) for e in caught.value.errors()]
    assert where in locs


def test_a_whole_answer_is_a_completed_response_with_one_message() -> None:
    writer = ResponseWriter("m", body(input="hi").echo())
    done = writer.whole("Hello.", "stop", Usage(5, 2))
    assert (done["object"], done["status"], done["incomplete_details"], done["store"]) == ("response", "completed", None, True)
    assert body(input="hi", store=False).echo()["store"] is False
    assert done["output"] == [{
        "id": writer.item_id, "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello.", "annotations": [], "logprobs": []}],
    }]
    assert done["usage"] == {
        "input_tokens": 5, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7,
    }


def test_a_stream_opens_each_part_streams_deltas_and_ends_incomplete_when_cut() -> None:
    writer = ResponseWriter("m", body(input="hi", max_output_tokens=2).echo(), logprobs=True)
    raw = writer.opening() + writer.text("Hel", [TokenLogprob("Hel", -0.5, b"Hel")]) + writer.text("lo", [TokenLogprob("lo", -0.25, b"lo")])
    sent = events(raw + writer.finish("length", Usage(3, 2)))
    assert [e["type"] for e in sent] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.incomplete",
    ]
    assert [e["sequence_number"] for e in sent] == list(range(10))
    assert [e["delta"] for e in sent[4:6]] == ["Hel", "lo"] and sent[6]["text"] == "Hello"
    assert [lp["logprob"] for lp in sent[6]["logprobs"]] == [-0.5, -0.25]
    last = sent[-1]["response"]
    assert (last["status"], last["incomplete_details"], last["output"][0]["status"]) == ("incomplete", {"reason": "max_output_tokens"}, "incomplete")
    assert last["id"] == sent[0]["response"]["id"] and sent[0]["response"]["status"] == "in_progress"


def test_a_named_call_streams_its_arguments_and_a_required_one_comes_whole() -> None:
    tool = FunctionDef(name="f", parameters={"type": "object"})
    named = ResponseWriter("m", {}, call=ToolUse((tool,), "f"))
    sent = events(named.opening() + named.text('{"a":') + named.text("1}") + named.finish("stop", Usage(1, 2)))
    assert [e["type"] for e in sent][2:] == [
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed",
    ]
    assert sent[-3]["arguments"] == '{"a":1}' and sent[-2]["item"]["name"] == "f"
    required = ResponseWriter("m", {}, call=ToolUse((tool,)))
    sent = events(required.opening() + required.text('{"name":"f",') + required.text('"arguments":{"a": 1}}') + required.finish("stop", Usage(1, 2)))
    item = sent[-1]["response"]["output"][0]
    assert (item["type"], item["name"], item["arguments"]) == ("function_call", "f", '{"a":1}')
    assert [e["type"] for e in sent].count("response.function_call_arguments.delta") == 1


def test_an_auto_answer_opens_its_message_once_it_is_a_reply_or_comes_as_a_call() -> None:
    auto = ToolUse((FunctionDef(name="f", parameters={"type": "object"}),), auto=True)
    writer = ResponseWriter("m", {}, call=auto)
    raw = writer.opening() + writer.text('{"response": ') + writer.text('"Hel') + writer.text('lo"}')
    sent = events(raw + writer.finish("stop", Usage(1, 2)))
    assert [e["type"] for e in sent] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed",
    ]
    assert [e["delta"] for e in sent[4:6]] == ["Hel", "lo"] and sent[6]["text"] == "Hello"
    assert sent[-1]["response"]["output"][0]["content"][0]["text"] == "Hello"
    writer = ResponseWriter("m", {}, call=auto)
    raw = writer.opening() + writer.text('{"tool_call": {"name": "f", "arguments": {"a": [1]}}}')
    sent = events(raw + writer.finish("stop", Usage(1, 2)))
    assert [e["type"] for e in sent][2:] == [
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed",
    ]
    item = sent[-1]["response"]["output"][0]
    assert (item["type"], item["name"], item["arguments"]) == ("function_call", "f", '{"a":[1]}')
    whole = ResponseWriter("m", {}, call=auto).whole('{"response": "Hi"}', "stop", Usage(1, 2))
    assert whole["output"][0]["content"][0]["text"] == "Hi"


def test_a_failure_after_the_headers_ends_the_stream_with_error_and_failed() -> None:
    writer = ResponseWriter("m", {})
    sent = events(writer.opening() + writer.text("Hel") + writer.error("generation failed: boom"))
    assert [e["type"] for e in sent][-2:] == ["error", "response.failed"]
    assert (sent[-2]["message"], sent[-1]["response"]["status"]) == ("generation failed: boom", "failed")
    assert sent[-1]["response"]["error"] == {"code": "server_error", "message": "generation failed: boom"}


def test_a_response_s_output_items_can_be_sent_back_as_input() -> None:
    tool = FunctionDef(name="f", parameters={"type": "object"})
    said = ResponseWriter("m", {}, logprobs=True).whole("Hi there.", "stop", Usage(1, 2), [TokenLogprob("Hi", -0.1, b"Hi")])
    called = ResponseWriter("m", {}, call=ToolUse((tool,), "f")).whole('{"a":1}', "stop", Usage(1, 2))
    call = called["output"][0]
    items = [
        {"role": "user", "content": "hello"}, *said["output"], {"role": "user", "content": "call f"}, *called["output"],
        {"type": "function_call_output", "call_id": call["call_id"], "output": "done"},
    ]
    chat = ChatBody.model_validate(body(input=items).chat_fields())
    assert [m["role"] for m in chat.plain_messages()] == ["user", "assistant", "user", "assistant", "tool"]
    assert chat.plain_messages()[1]["content"] == "Hi there."
    assert json.loads(chat.plain_messages()[3]["content"]) == [{"name": "f", "arguments": '{"a":1}'}]
