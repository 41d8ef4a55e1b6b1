"""llama.cpp's server's own /completion and /props through a real node (the real edge model):
the same answer as /v1/completions for the same sampler, whole and streamed, log probabilities,
a JSON schema, the cache shared with /v1, keys, and the settings /props reports."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest


pytestmark = pytest.mark.slow

# llama.cpp's own sampler defaults, which a /completion request without them gets.
LLAMA_SAMPLER = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}


def _complete(base: str, **body: Any) -> httpx.Response:
    return httpx.post(base + "/completion", json=body, timeout=120)


def _stream(base: str, **body: Any) -> list[dict[str, Any]]:
    with httpx.stream("POST", base + "/completion", json={**body, "stream": True}, timeout=120) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        return [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]


def test_a_completion_is_the_v1_answer_to_the_same_request(node_url: str) -> None:
    mine = _complete(node_url, prompt="Once upon a time", n_predict=12, temperature=0, cache=False)
    assert mine.status_code == 200 and mine.headers["x-edgeroute-route"] == "edge"
    body = mine.json()
    theirs = openai.OpenAI(base_url=node_url + "/v1", api_key="x").completions.create(
        model="auto", prompt="Once upon a time", max_tokens=12, temperature=0, extra_body={"cache": False, **LLAMA_SAMPLER}
    )
    assert body["content"] == theirs.choices[0].text and body["stop"] is True
    assert theirs.usage is not None
    assert (body["tokens_predicted"], body["tokens_evaluated"]) == (theirs.usage.completion_tokens, theirs.usage.prompt_tokens)
    assert body["stop_type"] == ("limit" if theirs.choices[0].finish_reason == "length" else "eos")
    assert body["generation_settings"]["n_predict"] == 12 and body["prompt"] == "Once upon a time"


def test_a_stream_adds_up_to_the_whole_answer(node_url: str) -> None:
    whole = _complete(node_url, prompt="The capital of France is", n_predict=10, temperature=0, cache=False).json()
    events = _stream(node_url, prompt="The capital of France is", n_predict=10, temperature=0, cache=False)
    assert [e["stop"] for e in events] == [False] * (len(events) - 1) + [True]
    assert "".join(e["content"] for e in events) == whole["content"]
    assert events[-1]["tokens_predicted"] == whole["tokens_predicted"] and events[-1]["stop_type"] == whole["stop_type"]


def test_n_probs_gives_each_token_with_its_alternatives(node_url: str) -> None:
    body = _complete(node_url, prompt="One, two,", n_predict=4, temperature=0, n_probs=2, cache=False).json()
    probs = body["completion_probabilities"]
    assert len(probs) == body["tokens_predicted"] and "".join(p["token"] for p in probs) == body["content"]
    assert all(len(p["top_logprobs"]) == 2 and p["top_logprobs"][0]["token"] == p["token"] for p in probs)


def test_a_json_schema_gets_matching_json(node_url: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
    body = _complete(node_url, prompt="A number as JSON:", n_predict=20, temperature=0, json_schema=schema).json()
    assert list(json.loads(body["content"])) == ["n"]


def test_a_v1_answer_in_the_cache_answers_the_same_completion(node_url: str) -> None:
    prompt = "The tallest mountain on Earth is (llama.cpp cache test)"
    first = httpx.post(node_url + "/v1/completions", json={"model": "auto", "prompt": prompt, "max_tokens": 6, "temperature": 0, **LLAMA_SAMPLER}, timeout=120)
    again = _complete(node_url, prompt=prompt, n_predict=6, temperature=0)
    assert [first.headers["x-edgeroute-route"], again.headers["x-edgeroute-route"]] == ["edge", "cache-exact"]
    assert again.json()["content"] == first.json()["choices"][0]["text"]


def test_props_reports_the_edge_model_and_the_defaults(node_url: str, node_app) -> None:  # type: ignore[no-untyped-def]
    node = node_app.state.node
    props = httpx.get(node_url + "/props", timeout=10).json()
    assert props["default_generation_settings"]["n_ctx"] == node.edge.n_ctx
    assert props["default_generation_settings"]["params"]["top_k"] == 40
    assert (props["total_slots"], props["model_alias"]) == (node.settings.edge.slots, node.edge_model)
    assert props["model_path"] == str(node.edge.spec.path) and "im_start" in props["chat_template"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": [1, "two"]}, "prompt"),
        ({"prompt": [1, 10_000_000]}, "prompt"),
        ({"prompt": "x", "n_probs": 9}, "n_probs"),
        ({"prompt": "x", "n_predict": 2_000_000}, "n_predict"),
        ({"prompt": "x", "grammar": "root ::= \"a\""}, "grammar"),
        ({"prompt": "x", "model": "nope"}, "model"),
    ],
)
def test_what_it_cannot_do_is_a_clear_4xx(node_url: str, body: dict[str, Any], param: str) -> None:
    answer = httpx.post(node_url + "/completion", json=body, timeout=30)
    assert answer.status_code in (400, 404) and answer.json()["error"]["param"] == param


def test_the_node_s_keys_guard_them(keyed_node: str) -> None:
    assert httpx.get(keyed_node + "/props", timeout=10).status_code == 401
    assert _complete(keyed_node, prompt="hi", n_predict=2).status_code == 401
    allowed = httpx.post(keyed_node + "/completions", json={"prompt": "hi", "n_predict": 2}, headers={"authorization": "Bearer key-a"}, timeout=120)
    assert allowed.status_code == 200 and allowed.json()["stop"] is True


def test_a_stop_word_ends_as_stop_type_word_on_every_api(node_url: str) -> None:
    free = _complete(node_url, prompt="One, two, three,", n_predict=16, temperature=0, cache=False).json()["content"]
    words = free.split()
    assert len(words) >= 2, free
    stop = words[1]  # from the answer itself, so the stop is reached
    body = {"prompt": "One, two, three,", "n_predict": 16, "temperature": 0, "cache": False, "stop": [stop, "never-seen"]}
    whole = _complete(node_url, **body).json()
    events = _stream(node_url, **body)
    assert whole["content"] == free[: free.find(stop)] == "".join(e["content"] for e in events)
    assert (whole["stop_type"], whole["stopping_word"]) == ("word", stop)
    assert (events[-1]["stop_type"], events[-1]["stopping_word"]) == ("word", stop)
    theirs = openai.OpenAI(base_url=node_url + "/v1", api_key="x").completions.create(
        model="auto", prompt="One, two, three,", max_tokens=16, temperature=0, stop=[stop, "never-seen"],
        extra_body={"cache": False, **LLAMA_SAMPLER},
    )
    choice = theirs.choices[0]
    assert (choice.text, choice.finish_reason, (choice.model_extra or {}).get("stop_reason")) == (whole["content"], "stop", stop)


def test_an_answer_from_the_cache_keeps_the_stop_word_that_ended_it(node_url: str) -> None:
    prompt = "Seven, eight, nine, (llama.cpp stop-word cache test)"
    free = _complete(node_url, prompt=prompt, n_predict=16, temperature=0, cache=False).json()["content"]
    words = free.split()
    assert len(words) >= 2, free
    body = {"prompt": prompt, "n_predict": 16, "temperature": 0, "stop": [words[1]]}
    first, again = _complete(node_url, **body), _complete(node_url, **body)
    assert [first.headers["x-edgeroute-route"], again.headers["x-edgeroute-route"]] == ["edge", "cache-exact"]
    assert [(r.json()["stop_type"], r.json()["stopping_word"]) for r in (first, again)] == [("word", words[1])] * 2
    streamed = _stream(node_url, **body)  # a hit replayed as a stream
    assert (streamed[-1]["stop_type"], streamed[-1]["stopping_word"]) == ("word", words[1])
    assert "".join(e["content"] for e in streamed) == first.json()["content"]


def test_more_stop_strings_than_openai_s_four_are_taken_as_llama_cpp_takes_them(node_url: str) -> None:
    free = _complete(node_url, prompt="Four, five, six,", n_predict=16, temperature=0, cache=False).json()["content"]
    words = free.split()
    assert len(words) >= 2, free
    stops = [f"<never-{i}>" for i in range(11)] + [words[1]]
    body = _complete(node_url, prompt="Four, five, six,", n_predict=16, temperature=0, cache=False, stop=stops).json()
    assert (body["content"], body["stop_type"], body["stopping_word"]) == (free[: free.find(words[1])], "word", words[1])
    too_many = _complete(node_url, prompt="x", stop=[f"s{i}" for i in range(33)])
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "stop"
    v1 = httpx.post(node_url + "/v1/completions", json={"model": "edge", "prompt": "x", "stop": stops}, timeout=30)
    assert v1.status_code == 400 and "at most 4" in v1.json()["error"]["message"]  # OpenAI's API keeps its 4
