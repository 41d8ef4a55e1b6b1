"""Ollama's wire format (models.ollama): the OpenAI request each body asks for, and the JSON
lines and objects the writer sends."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from models import TokenLogprob, Usage
from models.openai.schemas import ChatBody
from models.openai.tools import ToolUse
from models.ollama import (
    CatalogEntry,
    NdjsonWriter,
    OllamaChatBody,
    OllamaEmbedBody,
    OllamaGenerateBody,
    OllamaShowBody,
    loaded,
    model_name,
    running,
    show,
    tag_name,
    tags,
)


def test_names_with_the_default_tag_are_the_node_ids_and_listed_with_it() -> None:
    assert model_name("smollm2-135m-instruct:latest") == "smollm2-135m-instruct"
    assert model_name("org/model:q4") == "org/model:q4"
    assert tag_name("auto") == "auto:latest"
    assert tag_name("org/model:q4") == "org/model:q4"
    assert tag_name("host:8000/model") == "host:8000/model:latest"


def test_a_chat_body_becomes_the_chat_completion_with_ollamas_defaults() -> None:
    body = OllamaChatBody.model_validate({"model": "edge:latest", "messages": [{"role": "user", "content": "hi"}]})
    assert body.openai_fields() == {
        "model": "edge", "stream": True, "n": 1, "temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.0,
        "repeat_penalty": 1.1, "messages": [{"role": "user", "content": "hi"}],
    }


def test_options_become_the_openai_sampling_fields() -> None:
    body = OllamaChatBody.model_validate({
        "model": "auto", "stream": False, "messages": [{"role": "user", "content": "hi"}],
        "options": {
            "temperature": 0, "top_p": 0.5, "seed": 7, "num_predict": 12, "stop": ["\n"], "presence_penalty": 0.5,
            "frequency_penalty": 0.25, "num_ctx": 4096, "top_k": 20, "min_p": 0.1, "repeat_penalty": 1.3,
            "num_thread": 2, "mirostat": 1,
        },
        "format": "json", "logprobs": True, "top_logprobs": 3, "cache": False,
    })
    fields = body.openai_fields()
    assert fields == {
        "cache": False, "model": "auto", "stream": False, "n": 1, "temperature": 0, "top_p": 0.5, "top_k": 20,
        "min_p": 0.1, "repeat_penalty": 1.3, "seed": 7,
        "max_tokens": 12, "stop": ["\n"], "presence_penalty": 0.5, "frequency_penalty": 0.25,
        "response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": "hi"}],
        "logprobs": True, "top_logprobs": 3,
    }


@pytest.mark.parametrize("num_predict", [-1, -2, 0])
def test_unbounded_num_predict_leaves_max_tokens_to_the_node(num_predict: int) -> None:
    body = OllamaChatBody.model_validate({"model": "a", "messages": [], "options": {"num_predict": num_predict, "seed": -1}})
    fields = body.openai_fields()
    assert "max_tokens" not in fields and "seed" not in fields


def test_a_schema_format_is_a_json_schema_response_format() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    body = OllamaChatBody.model_validate({"model": "a", "messages": [], "format": schema})
    assert body.openai_fields()["response_format"] == {"type": "json_schema", "json_schema": {"name": "format", "schema": schema}}


def test_earlier_tool_calls_and_results_become_openai_messages() -> None:
    body = OllamaChatBody.model_validate({
        "model": "a",
        "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "content": "12 C", "tool_name": "get_weather"},
        ],
    })
    assert body.openai_fields()["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        ]},
        {"role": "tool", "content": "12 C", "name": "get_weather"},
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "images"),
        ({"messages": [], "think": True}, "think"),
        ({"messages": [], "format": "yaml"}, "format"),
        ({"messages": [], "options": {"temperature": "hot"}}, "temperature"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"messages": [], "top_logprobs": 21}, "top_logprobs"),
    ],
)
def test_what_a_chat_body_cannot_ask_is_refused(body: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        OllamaChatBody.model_validate({"model": "a", **body})
    assert field in str(caught.value)


def test_generate_is_a_chat_turn_unless_raw() -> None:
    templated = OllamaGenerateBody.model_validate({"model": "a", "prompt": "2+2?", "system": "Be brief.", "stream": False})
    assert templated.openai_fields()["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    raw = OllamaGenerateBody.model_validate({"model": "a", "prompt": "Once", "raw": True, "logprobs": True, "top_logprobs": 2})
    fields = raw.openai_fields()
    assert (fields["prompt"], fields["logprobs"], "messages" in fields) == ("Once", 2, False)


@pytest.mark.parametrize(
    "extra", [{"suffix": "end"}, {"template": "{{ .Prompt }}"}, {"context": [1, 2]}, {"images": ["aGk="]}]
)
def test_what_generate_cannot_do_is_refused(extra: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as caught:
        OllamaGenerateBody.model_validate({"model": "a", "prompt": "x", **extra})
    assert next(iter(extra)) in str(caught.value)


def test_generate_accepts_an_empty_context() -> None:
    assert OllamaGenerateBody.model_validate({"model": "a", "prompt": "x", "context": []}).context == []


def test_embed_takes_input_or_the_older_prompt() -> None:
    assert OllamaEmbedBody.model_validate({"model": "m", "input": "a"}).texts() == ["a"]
    assert OllamaEmbedBody.model_validate({"model": "m", "input": ["a", "b"]}).texts() == ["a", "b"]
    assert OllamaEmbedBody.model_validate({"model": "m", "prompt": "c"}).texts() == ["c"]
    assert OllamaShowBody.model_validate({"name": "x:latest"}).model_id() == "x"
    assert OllamaShowBody.model_validate({}).model_id() is None


def test_a_chat_stream_is_json_lines_ending_with_the_counts() -> None:
    writer = NdjsonWriter("chat", "edge")
    assert writer.media_type == "application/x-ndjson" and writer.opening() == b""
    first = json.loads(writer.text("Hel"))
    assert (first["model"], first["message"], first["done"]) == ("edge", {"role": "assistant", "content": "Hel"}, False)
    assert first["created_at"].endswith("Z") and "logprobs" not in first
    raw = writer.finish("length", Usage(5, 2))
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    last = json.loads(raw)
    assert (last["done"], last["done_reason"], last["prompt_eval_count"], last["eval_count"]) == (True, "length", 5, 2)
    assert last["message"] == {"role": "assistant", "content": ""} and last["load_duration"] == 0
    assert last["total_duration"] == last["prompt_eval_duration"] + last["eval_duration"] and last["eval_duration"] >= 0


def test_a_generate_answer_carries_response_and_log_probabilities() -> None:
    writer = NdjsonWriter("generate", "m", logprobs=True)
    top = (TokenLogprob("a", -0.1, b"a"), TokenLogprob("b", -2.0, b"b"))
    body = writer.whole("a", "stop", Usage(1, 1), [TokenLogprob("a", -0.1, b"a", top)])
    assert (body["response"], body["done"], body["done_reason"], "message" in body) == ("a", True, "stop", False)
    assert body["logprobs"] == [{
        "token": "a", "logprob": -0.1, "bytes": [97],
        "top_logprobs": [{"token": "a", "logprob": -0.1, "bytes": [97]}, {"token": "b", "logprob": -2.0, "bytes": [98]}],
    }]
    assert body["prompt_eval_duration"] == 0  # a whole answer's split is not seen


def _tools() -> ToolUse:
    use = OllamaChatBody.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    ]}).openai_fields()
    tools = ChatBody.model_validate(use).tool_use()
    assert tools is not None and tools.auto
    return tools


def test_given_tools_a_call_comes_whole_with_object_arguments_and_a_reply_as_text() -> None:
    writer = NdjsonWriter("chat", "m", tools=_tools())
    raw = writer.text('{"tool_call": {"name": "get_weather", ') + writer.text('"arguments": {"city": "Oslo"}}}')
    assert raw == b""
    first, last = [json.loads(x) for x in writer.finish("stop", Usage(3, 9)).splitlines()]
    assert first["message"] == {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}
    assert (first["done"], last["done"], last["message"]) == (False, True, {"role": "assistant", "content": ""})
    writer = NdjsonWriter("chat", "m", tools=_tools())
    lines = [json.loads(x) for x in (writer.text('{"response": "Sun') + writer.text('ny."}') + writer.finish("stop", Usage(3, 4))).splitlines()]
    assert [x["message"]["content"] for x in lines] == ["Sun", "ny.", ""] and "tool_calls" not in lines[0]["message"]
    whole = NdjsonWriter("chat", "m", tools=_tools()).whole('{"tool_call": {"name": "get_weather", "arguments": {}}}', "stop", Usage(1, 1))
    assert whole["message"]["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {}}}] and whole["done_reason"] == "stop"
    assert NdjsonWriter("chat", "m", tools=_tools()).whole('{"response": "Hi"}', "stop", Usage(1, 1))["message"]["content"] == "Hi"


def test_an_error_after_the_first_line_is_an_error_line() -> None:
    assert json.loads(NdjsonWriter("chat", "m").error("generation failed: boom")) == {"error": "generation failed: boom"}


def test_an_empty_request_answers_load_or_unload() -> None:
    assert loaded("chat", "m")["done_reason"] == "load"
    assert loaded("generate", "m", unload=True) | {"created_at": ""} == {
        "model": "m", "created_at": "", "response": "", "done": True, "done_reason": "unload",
    }


def test_listings_name_models_with_their_tag() -> None:
    entry = CatalogEntry(
        "smollm2", ("completion",), family="llama", format="gguf", size=10, digest="ab", quantization="Q4_1",
        context_length=2048, description="a model",
    )
    [listed] = tags([entry])["models"]
    assert (listed["name"], listed["model"], listed["size"], listed["digest"]) == ("smollm2:latest", "smollm2:latest", 10, "ab")
    assert listed["details"]["families"] == ["llama"] and listed["details"]["quantization_level"] == "Q4_1"
    assert running([entry])["models"][0]["context_length"] == 2048
    shown = show(entry)
    assert shown["capabilities"] == ["completion"] and shown["model_info"]["llama.context_length"] == 2048
    assert "llama.context_length" not in show(CatalogEntry("auto", ("completion",)))["model_info"]
