"""``response_format`` across the hybrid node: the member is asked for it, and a JSON answer a
member breaks mid-stream is finished by the edge as the same JSON."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from tests.cloud.cloud_servers import chat_chunk, sse
from tests.router.hybrid_helpers import ASK, RecordingServer, decisions, node, sse_lines, text_of

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]},
    },
}


def test_a_json_answer_broken_mid_stream_is_finished_on_the_edge_as_json(tmp_path: Path) -> None:
    stall = RecordingServer([("send", sse(chat_chunk('{"answer"'))), ("send", sse(chat_chunk(":"))), ("sleep", 30)])
    response_format = {"type": "json_schema", "json_schema": {"name": "sum", "schema": SCHEMA, "strict": True}}
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            body = {
                "model": "cloud", "messages": ASK, "stream": True, "max_tokens": 24, "temperature": 0,
                "response_format": response_format,
            }
            _, lines = sse_lines(base, body)
            text = text_of(lines)
            assert text.startswith('{"answer":')
            value = json.loads(text)
            assert list(value) == ["answer"] and isinstance(value["answer"], int)
            assert decisions(app)[-1].fallback == "cloud->edge"
            sent = stall.access_log[0]
            assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "response", "schema": SCHEMA}}
    finally:
        stall.close()


def test_a_forced_call_broken_mid_stream_is_finished_on_the_edge_as_one_call(tmp_path: Path) -> None:
    stall = RecordingServer([("send", sse(chat_chunk('{"city"'))), ("send", sse(chat_chunk(':"Par'))), ("sleep", 30)])
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            body = {
                "model": "cloud", "messages": ASK, "stream": True, "max_tokens": 24, "temperature": 0,
                "tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            }
            _, lines = sse_lines(base, body)
            events = [json.loads(x) for x in lines[:-1]]
            parts = [t for e in events for t in e["choices"][0]["delta"].get("tool_calls") or ()]
            assert parts[0]["function"]["name"] == "get_weather" and parts[0]["id"].startswith("call_")
            arguments = json.loads("".join(p["function"]["arguments"] for p in parts))
            assert arguments["city"].startswith("Par")
            assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
            assert decisions(app)[-1].fallback == "cloud->edge"
            sent = stall.access_log[0]  # the member got the call's schema and instruction, not the tools
            assert sent["response_format"]["json_schema"]["schema"] == WEATHER["function"]["parameters"]
            assert sent["messages"][0]["role"] == "system" and "get_weather" in sent["messages"][0]["content"]
            assert "tools" not in sent
    finally:
        stall.close()


@pytest.mark.parametrize(
    ("sent_before", "kind"),
    [('{"response":"The weather in', "reply"), ('{"tool_call":{"name":"get_weather","arguments":{"city":"Par', "call")],
)
def test_an_auto_answer_broken_mid_stream_is_finished_on_the_edge_in_the_branch_it_took(
    tmp_path: Path, sent_before: str, kind: str
) -> None:
    stall = RecordingServer([("send", sse(chat_chunk(sent_before[:9]))), ("send", sse(chat_chunk(sent_before[9:]))), ("sleep", 30)])
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            body = {"model": "cloud", "messages": ASK, "stream": True, "max_tokens": 24, "temperature": 0, "tools": [WEATHER]}
            _, lines = sse_lines(base, body)
            events = [json.loads(x) for x in lines[:-1]]
            deltas = [e["choices"][0]["delta"] for e in events]
            content = "".join(d.get("content") or "" for d in deltas)
            parts = [t for d in deltas for t in d.get("tool_calls") or ()]
            finish = events[-1]["choices"][0]["finish_reason"]
            if kind == "reply":
                assert content.startswith("The weather in") and not parts and finish in ("stop", "length")
            else:
                [call] = parts
                assert (content, call["function"]["name"], finish) == ("", "get_weather", "tool_calls")
                assert json.loads(call["function"]["arguments"])["city"].startswith("Par")
            assert decisions(app)[-1].fallback == "cloud->edge"
            sent = stall.access_log[0]  # the member got the choice's schema and instruction, not the tools
            assert [b["required"] for b in sent["response_format"]["json_schema"]["schema"]["anyOf"]] == [["tool_call"], ["response"]]
            assert "tools" not in sent and "get_weather" in sent["messages"][0]["content"]
    finally:
        stall.close()


def test_logprobs_come_through_from_a_member(tmp_path: Path) -> None:
    """llama.cpp's own server as the member: its log probabilities reach the client, whole and streamed."""
    from tests.cloud.cloud_servers import llama_server, llama_settings, running

    proc = llama_server(tmp_path, name="member")
    with running(proc), node(tmp_path, [llama_settings(proc, "member")]) as (base, _):
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
        kwargs: dict = {"model": "cloud", "messages": ASK, "temperature": 0, "max_tokens": 8, "logprobs": True, "top_logprobs": 2}
        whole = client.chat.completions.create(**kwargs).choices[0]
        entries = whole.logprobs.content  # type: ignore[union-attr]
        assert entries and "".join(e.token for e in entries) == whole.message.content
        assert all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in entries)
        streamed = [e for c in client.chat.completions.create(stream=True, **kwargs) if c.choices and c.choices[0].logprobs
                    for e in c.choices[0].logprobs.content or ()]
        assert [e.token for e in streamed] == [e.token for e in entries]
