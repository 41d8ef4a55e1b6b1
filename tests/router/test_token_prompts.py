"""Prompts given as token ids (OpenAI's and vLLM's int arrays on /v1/completions, llama.cpp's on
/completion) on a real node: the edge model's ids, answered as the text they stand for."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow

GREEDY = {"max_tokens": 8, "temperature": 0, "cache": False}


def post(base: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(base + path, json=body, timeout=120)


def ids(base: str, text: str, **kw: Any) -> list[int]:
    return post(base, "/tokenize", {"content": text, **kw}).json()["tokens"]


def test_a_token_id_prompt_is_answered_as_its_text(node_url: str) -> None:
    client = openai.OpenAI(base_url=node_url + "/v1", api_key="x", max_retries=0)
    text = "The three primary colours are"
    by_text = client.completions.create(model="auto", prompt=text, max_tokens=8, temperature=0, extra_body={"cache": False})
    by_ids = client.completions.create(model="auto", prompt=ids(node_url, text), max_tokens=8, temperature=0,
                                       extra_body={"cache": False})
    assert by_ids.choices[0].text == by_text.choices[0].text != ""
    assert by_ids.usage is not None and by_text.usage is not None
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens == len(ids(node_url, text))


def test_several_token_id_prompts_give_a_choice_each_in_order(node_url: str) -> None:
    texts = ["One, two,", "Paris is the capital of"]
    many = post(node_url, "/v1/completions", {"model": "edge", "prompt": [ids(node_url, t) for t in texts], **GREEDY}).json()
    one_by_one = [post(node_url, "/v1/completions", {"model": "edge", "prompt": t, **GREEDY}).json() for t in texts]
    assert [c["text"] for c in many["choices"]] == [o["choices"][0]["text"] for o in one_by_one]
    assert [c["index"] for c in many["choices"]] == [0, 1]


def test_special_tokens_and_a_leading_bos_read_back_as_the_same_ids(node_url: str) -> None:
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    tokens = ids(node_url, text, add_special=True)
    by_ids = post(node_url, "/v1/completions", {"model": "edge", "prompt": tokens, **GREEDY}).json()
    by_text = post(node_url, "/v1/completions", {"model": "edge", "prompt": text, **GREEDY}).json()
    assert by_ids["choices"][0]["text"] == by_text["choices"][0]["text"]
    assert by_ids["usage"]["prompt_tokens"] == by_text["usage"]["prompt_tokens"]


def test_llama_cpp_s_completion_takes_token_ids_and_names_the_prompt_as_text(node_url: str) -> None:
    text = "Once upon a time"
    mine = post(node_url, "/completion", {"prompt": ids(node_url, text), "n_predict": 6, "temperature": 0, "cache": False})
    theirs = post(node_url, "/completion", {"prompt": text, "n_predict": 6, "temperature": 0, "cache": False})
    assert mine.status_code == 200 and mine.json()["content"] == theirs.json()["content"]
    assert mine.json()["prompt"] == text and mine.json()["tokens_evaluated"] == theirs.json()["tokens_evaluated"]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"model": "edge", "prompt": [1, 10_000_000]}, "prompt"),
        ("/v1/completions", {"model": "edge", "prompt": [1, "two"]}, "prompt"),
        ("/v1/completions", {"model": "edge", "prompt": []}, "prompt"),
        ("/v1/completions", {"model": "edge", "prompt": [[1, 2], []]}, "prompt"),
        ("/completion", {"prompt": [5, "x"]}, "prompt"),
    ],
)
def test_bad_token_id_prompts_are_a_400_naming_the_prompt(node_url: str, path: str, body: dict[str, Any], param: str) -> None:
    answer = post(node_url, path, body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
