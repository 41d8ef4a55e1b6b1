"""``/tokenize`` and ``/detokenize`` on a real node (the real edge model): llama.cpp's and vLLM's
request shapes, the same count a chat request is charged, ids that ``logit_bias`` takes, the API
key, and 4xx for what the node cannot answer."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


pytestmark = pytest.mark.slow

TEXT = "Hello world, ça va? <|im_start|>"


def post(base: str, path: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return httpx.post(base + path, json=body, timeout=120, **kwargs)


def test_a_text_s_tokens_read_back_to_the_text(node_url: str) -> None:
    plain = post(node_url, "/tokenize", {"content": TEXT}).json()
    assert plain["count"] == len(plain["tokens"]) > 3 and plain["model"] == "smollm2-135m-instruct"
    assert all(isinstance(t, int) for t in plain["tokens"])
    # ``<|im_start|>`` is one special token, as llama.cpp's server parses it; detokenized answers leave it out.
    assert post(node_url, "/detokenize", {"tokens": plain["tokens"]}).json()["content"] == TEXT.removesuffix("<|im_start|>")
    pieces = post(node_url, "/tokenize", {"prompt": TEXT, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == plain["tokens"]
    # A piece that is part of a character comes as its bytes (llama.cpp's server does the same).
    raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)
    assert raw.decode() == TEXT.removesuffix("<|im_start|>")
    assert any(isinstance(p["piece"], list) for p in pieces)  # "ç" is two tokens here


def test_a_chat_s_count_is_what_a_chat_request_is_charged(node_url: str) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a planet."}]
    counted = post(node_url, "/tokenize", {"messages": messages}).json()
    answer = post(node_url, "/v1/chat/completions", {"model": "edge", "messages": messages, "max_tokens": 1, "cache": False})
    assert counted["count"] == answer.json()["usage"]["prompt_tokens"]
    assert counted["max_model_len"] == 2048  # the node's edge window (tests/router/conftest.py)


def test_a_tokenized_word_steers_the_answer_through_logit_bias(node_url: str) -> None:
    [token] = post(node_url, "/tokenize", {"content": " banana"}).json()["tokens"]
    body = {
        "model": "edge", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 1, "temperature": 0,
        "logit_bias": {str(token): 100}, "cache": False,
    }
    assert post(node_url, "/v1/chat/completions", body).json()["choices"][0]["message"]["content"] == " banana"


@pytest.mark.parametrize(
    ("path", "body", "status", "param"),
    [
        ("/tokenize", {"content": "x", "prompt": "y"}, 400, None),
        ("/tokenize", {}, 400, None),
        ("/tokenize", {"content": "x", "model": "cloud"}, 400, "model"),
        ("/tokenize", {"content": "x", "model": "no-such-model"}, 404, "model"),
        ("/detokenize", {"tokens": [10**8]}, 400, "tokens"),
        ("/detokenize", {"tokens": [-1]}, 400, "tokens.0"),
        ("/detokenize", {"tokens": "12"}, 400, "tokens"),
    ],
)
def test_what_the_tokenizer_cannot_answer_is_a_clear_4xx(
    node_url: str, path: str, body: dict[str, Any], status: int, param: str | None
) -> None:
    answer = post(node_url, path, body)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_the_tokenizer_takes_the_api_s_key(keyed_node: str) -> None:
    assert post(keyed_node, "/tokenize", {"content": "hi"}).status_code == 401
    assert post(keyed_node, "/detokenize", {"tokens": [1]}, headers={"authorization": "Bearer wrong"}).status_code == 401
    ok = post(keyed_node, "/tokenize", {"content": "hi"}, headers={"authorization": "Bearer key-a"})
    assert ok.status_code == 200 and ok.json()["count"] >= 1
