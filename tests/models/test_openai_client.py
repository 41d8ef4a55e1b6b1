"""The client side of the OpenAI wire format (what the cloud pool sends and reads)."""

from __future__ import annotations

import pytest

from models.errors import ErrorEventError, MalformedEventError, WireFormatError
from models.openai.client import error_message, parse_event, parse_whole, request_body
from models.openai.schemas import ChatBody
from models import JSON_OBJECT, Chunk, GenerationRequest, SamplingParams, Usage


def test_chat_body_carries_sampling_and_usage_request() -> None:
    req = GenerationRequest(
        SamplingParams(max_tokens=7, temperature=0.0, top_p=0.9, stop=("\n",), seed=3),
        messages=({"role": "user", "content": "hi"},),
    )
    path, body = request_body(req, "m")
    assert path == "/chat/completions"
    assert body == {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        "top_p": 0.9,
        "max_tokens": 7,
        "stop": ["\n"],
        "seed": 3,
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_continuation_is_a_final_assistant_message_with_vllm_flags() -> None:
    req = GenerationRequest(
        SamplingParams(), messages=({"role": "user", "content": "hi"},), assistant_prefix="Hel"
    )
    _, body = request_body(req, "m")
    assert body["messages"][-1] == {"role": "assistant", "content": "Hel"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert "max_tokens" not in body and "seed" not in body and "stop" not in body


@pytest.mark.parametrize(
    "schema",
    [JSON_OBJECT, '{"properties":{"answer":{"type":"integer"}},"required":["answer"],"type":"object"}'],
    ids=["json_object", "json_schema"],
)
def test_response_format_round_trips_through_the_server_schema(schema: str) -> None:
    req = GenerationRequest(
        SamplingParams(json_schema=schema), messages=({"role": "user", "content": "hi"},)
    )
    _, body = request_body(req, "m")
    expected = "json_object" if schema == JSON_OBJECT else "json_schema"
    assert body["response_format"]["type"] == expected
    assert ChatBody.model_validate(body).sampling().json_schema == schema
    assert "response_format" not in request_body(GenerationRequest(SamplingParams(), prompt="x"), "m")[1]


def test_penalties_are_sent_only_when_set_and_read_back() -> None:
    params = SamplingParams(frequency_penalty=0.5, presence_penalty=-1.0, logit_bias=((7, -100.0), (42, 5.5)))
    _, body = request_body(GenerationRequest(params, messages=({"role": "user", "content": "hi"},)), "m")
    assert (body["frequency_penalty"], body["presence_penalty"]) == (0.5, -1.0)
    assert body["logit_bias"] == {"7": -100.0, "42": 5.5}
    assert ChatBody.model_validate(body).sampling() == params
    _, plain = request_body(GenerationRequest(SamplingParams(), prompt="x"), "m")
    assert "frequency_penalty" not in plain and "presence_penalty" not in plain and "logit_bias" not in plain


def test_sampler_extensions_are_sent_only_when_set_under_llama_cpp_s_and_vllm_s_names() -> None:
    params = SamplingParams(top_k=20, min_p=0.05, repeat_penalty=1.2)
    _, body = request_body(GenerationRequest(params, messages=({"role": "user", "content": "hi"},)), "m")
    assert (body["top_k"], body["min_p"], body["repeat_penalty"], body["repetition_penalty"]) == (20, 0.05, 1.2, 1.2)
    assert ChatBody.model_validate(body).sampling() == params
    _, plain = request_body(GenerationRequest(SamplingParams(), prompt="x"), "m")
    assert not {"top_k", "min_p", "repeat_penalty", "repetition_penalty"} & set(plain)
    assert ChatBody.model_validate({"model": "m", "messages": [{"role": "user", "content": "x"}], "repetition_penalty": 1.3}).sampling().repeat_penalty == 1.3


def test_top_p_0_is_sent_as_greedy_decoding() -> None:
    _, body = request_body(GenerationRequest(SamplingParams(temperature=1.2, top_p=0.0, seed=3), prompt="x"), "m")
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.0, 1.0, 3)


def test_prompt_continuation_appends_the_prefix() -> None:
    path, body = request_body(
        GenerationRequest(SamplingParams(), prompt="Once", assistant_prefix=" upon"), "m"
    )
    assert path == "/completions" and body["prompt"] == "Once upon"


def test_parse_chat_text_and_usage_events() -> None:
    assert (
        parse_event('{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}').text == ""
    )
    d = parse_event('{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}')
    assert (d.text, d.finish_reason, d.usage) == ("Hi", "stop", None)
    assert parse_event('{"choices":[{"index":0,"text":"yo","finish_reason":null}]}').text == "yo"
    u = parse_event('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}')
    assert (u.text, u.usage) == ("", Usage(3, 4))


def test_vllm_s_stop_reason_is_read_as_the_stop_word_when_it_is_text() -> None:
    word = parse_event('{"choices":[{"index":0,"text":"","finish_reason":"stop","stop_reason":"\\n\\n"}]}')
    assert (word.finish_reason, word.stop_word) == ("stop", "\n\n")
    token = parse_event('{"choices":[{"index":0,"text":"","finish_reason":"stop","stop_reason":128001}]}')
    assert (token.finish_reason, token.stop_word) == ("stop", None)
    whole = parse_whole(
        b'{"choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop","stop_reason":"END"}]}'
    )
    assert (whole.text, whole.stop_word) == ("a", "END")


@pytest.mark.parametrize(
    "data",
    [
        '{"choices":[{"delta":',
        "[1,2]",
        '{"id":"x"}',
        '{"choices":[{"delta":"x"}]}',
        '{"choices":[{"delta":{"content":5}}]}',
    ],
)
def test_malformed_events(data: str) -> None:
    with pytest.raises(MalformedEventError) as info:
        parse_event(data)
    assert isinstance(info.value, WireFormatError)


def test_error_event_and_error_bodies() -> None:
    with pytest.raises(ErrorEventError, match="boom"):
        parse_event('{"error":{"message":"boom","type":"server_error"}}')
    assert error_message(
        b'{"error":{"message":"too long","param":"messages","code":"context_length_exceeded"}}'
    ) == ("too long", "messages", "context_length_exceeded")
    assert error_message(b'{"object":"error","message":"vllm says no","code":400}') == (
        "vllm says no",
        None,
        None,
    )
    assert error_message(b"<html>bad gateway</html>") == ("<html>bad gateway</html>", None, None)


def test_a_whole_answer_body_asks_for_no_stream_and_is_read_whole() -> None:
    req = GenerationRequest(SamplingParams(max_tokens=2), messages=({"role": "user", "content": "hi"},))
    path, body = request_body(req, "m", stream=False)
    assert path == "/chat/completions"
    assert body == {
        "model": "m", "stream": False, "temperature": 1.0, "top_p": 1.0, "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}],
    }
    chat = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}],' \
        b' "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}'
    assert parse_whole(chat) == Chunk("Hi!", "stop", Usage(9, 2))
    text = b'{"choices": [{"index": 0, "text": "1, 2", "finish_reason": "length"}]}'
    assert parse_whole(text) == Chunk("1, 2", "length", None)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"{not json", "invalid JSON in the answer"),
        (b"[1]", "the answer is not an object"),
        (b'{"choices": []}', "no choice in the answer"),
        (b'{"choices": [{"message": {"content": 3}}]}', "text that is not a string in the answer"),
    ],
)
def test_malformed_whole_answers(data: bytes, error: str) -> None:
    with pytest.raises(MalformedEventError, match=error):
        parse_whole(data)
    with pytest.raises(ErrorEventError, match="^overloaded$"):
        parse_whole(b'{"error": {"message": "overloaded", "type": "server_error"}}')


def test_logprobs_are_read_from_both_shapes_and_asked_for_in_each() -> None:
    chat = parse_event(
        '{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null,"logprobs":{"content":'
        '[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.5,"bytes":[72,105]}]}]}}]}'
    )
    assert [(e.token, e.logprob, e.raw, [t.token for t in e.top]) for e in chat.logprobs] == [("Hi", -0.5, b"Hi", ["Hi"])]
    text = parse_event(
        '{"choices":[{"index":0,"text":" 5,","finish_reason":null,"logprobs":{"tokens":[" 5",","],'
        '"token_logprobs":[-0.1,-0.2],"top_logprobs":[{" 5":-0.1},{",":-0.2}],"text_offset":[0,2]}}]}'
    )
    assert [(e.token, e.logprob, [t.token for t in e.top]) for e in text.logprobs] == [(" 5", -0.1, [" 5"]), (",", -0.2, [","])]
    with pytest.raises(MalformedEventError):
        parse_event('{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["x"]}}]}')
    params = SamplingParams(logprobs=2)
    _, chat_body = request_body(GenerationRequest(params, messages=({"role": "user", "content": "hi"},)), "m")
    _, text_body = request_body(GenerationRequest(params, prompt="x"), "m")
    assert (chat_body["logprobs"], chat_body["top_logprobs"], text_body["logprobs"]) == (True, 2, 2)
    assert ChatBody.model_validate(chat_body).sampling().logprobs == 2
