"""Every kind of bad input gets a 4xx with an OpenAI-style error body, and the node keeps working."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
OK = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}


def post(base: str, path: str, content: bytes | None = None, json: object = None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    return httpx.post(base + path, content=content, json=json, headers=headers, timeout=60)


def assert_error(resp: httpx.Response, status: int, param: str | None, fragment: str) -> None:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    assert fragment in error["message"]
    assert error["type"] == "invalid_request_error"
    # Refused requests say where they went, like answers do.
    assert resp.headers["x-edgeroute-route"] == "error"
    assert resp.headers["x-edgeroute-reason"]


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        ({"model": "auto"}, "messages", "Field required"),
        ({"messages": []}, "messages", "at least 1 item"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role", "'user'"),
        ({**OK, "max_tokens": -5}, "max_tokens", "greater than or equal to 1"),
        ({**OK, "max_tokens": 10**12}, "max_tokens", "less than or equal to 1000000"),
        ({**OK, "temperature": 3.5}, "temperature", "less than or equal to 2"),
        ({**OK, "temperature": -0.1}, "temperature", "greater than or equal to 0"),
        ({**OK, "top_p": 1.5}, "top_p", "less than or equal to 1"),
        ({**OK, "n": 9}, "n", "less than or equal to 8"),
        ({**OK, "frequency_penalty": 2.5}, "frequency_penalty", "less than or equal to 2"),
        ({**OK, "presence_penalty": -3}, "presence_penalty", "greater than or equal to -2"),
        ({**OK, "logit_bias": {"5": 101}}, "logit_bias.5", "less than or equal to 100"),
        ({**OK, "logit_bias": {"yes": 1}}, "logit_bias", "logit_bias keys are token ids"),
        # str.isdigit() takes these; int() refuses the first (a 500 before) and reads the second as 12
        ({**OK, "logit_bias": {"²": 5}}, "logit_bias", "got '²'"),
        ({**OK, "logit_bias": {"١٢": 5}}, "logit_bias", "got '١٢'"),
        ({**OK, "top_k": -2}, "top_k", "greater than or equal to -1"),
        ({**OK, "seed": 2**63}, "seed", "less than or equal to 9223372036854775807"),
        ({**OK, "min_p": 1.5}, "min_p", "less than or equal to 1"),
        ({**OK, "repeat_penalty": 0}, "repeat_penalty", "greater than 0"),
        ({**OK, "repeat_penalty": 1.1, "repetition_penalty": 1.2}, None, "one setting"),
        ({**OK, "stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
        ({**OK, "messages": "hello"}, "messages", "valid list"),
    ],
)
def test_invalid_fields(node_url: str, body: dict[str, object], param: str, fragment: str) -> None:
    resp = post(node_url, CHAT, json=body)
    assert_error(resp, 400, param, fragment)
    assert resp.headers["x-edgeroute-reason"] == "invalid-request"


def test_a_logit_bias_token_the_model_lacks_is_refused_by_the_engine(node_url: str) -> None:
    resp = post(node_url, CHAT, json={**OK, "logit_bias": {"99999999": 1}})
    assert_error(resp, 400, "logit_bias", "token ids run from 0 to")


def test_malformed_json(node_url: str) -> None:
    resp = post(node_url, CHAT, content=b'{"messages": [{"role": "user",')
    assert_error(resp, 400, None, "not valid JSON")
    assert resp.headers["x-edgeroute-reason"] == "invalid-json"


# Every POST that reads a JSON body; Ollama's API answers ``{"error": message}``.
JSON_POSTS = [
    CHAT, "/v1/completions", "/v1/embeddings", "/v1/responses", "/completion", "/tokenize", "/detokenize",
    "/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/show",
]


@pytest.mark.parametrize("path", JSON_POSTS)
def test_an_empty_body_is_named_as_such(node_url: str, path: str) -> None:
    resp = post(node_url, path, content=b"")
    assert resp.status_code == 400, resp.text
    if path.startswith("/api/"):
        assert resp.json() == {"error": "the request body is empty; send a JSON object"}
    else:
        assert resp.json()["error"] == {
            "message": "the request body is empty; send a JSON object", "type": "invalid_request_error",
            "param": None, "code": "empty_body",
        }


def test_non_utf8_body(node_url: str) -> None:
    body = b'{"messages": [{"role": "user", "content": "\xff\xfe caf\xe9"}]}'
    assert_error(post(node_url, CHAT, content=body), 400, None, "not valid UTF-8")


def test_prompt_longer_than_the_context(node_url: str) -> None:
    body = {**OK, "messages": [{"role": "user", "content": "lorem ipsum " * 3000}]}
    resp = post(node_url, CHAT, json=body)
    assert_error(resp, 400, "messages", "context window is 2048 tokens")
    assert resp.json()["error"]["code"] == "context_length_exceeded"


def test_max_tokens_beyond_the_context(node_url: str) -> None:
    resp = post(node_url, "/v1/completions", json={"prompt": "hi", "max_tokens": 5000})
    assert_error(resp, 400, "prompt", "max_tokens 5000")


def test_unknown_model(node_url: str) -> None:
    resp = post(node_url, CHAT, json={**OK, "model": "gpt-17"})
    assert_error(resp, 404, "model", "valid models: auto, edge, cloud")
    assert resp.json()["error"]["code"] == "model_not_found"
    assert resp.headers["x-edgeroute-reason"] == "model-not-found"


def test_unknown_route_and_method(node_url: str) -> None:
    assert httpx.get(node_url + "/v1/nothing", timeout=10).status_code == 404
    resp = httpx.get(node_url + CHAT, timeout=10)
    assert resp.status_code == 405
    assert "error" in resp.json()


def test_node_still_serves_after_bad_input(node_url: str) -> None:
    for junk in (b"", b"null", b"[]", b"\x00\x01", b'{"messages": [{"role": "user", "content": 5}]}'):
        assert 400 <= post(node_url, CHAT, content=junk).status_code < 500
    resp = post(node_url, CHAT, json=OK)
    assert resp.status_code == 200
    assert resp.json()["choices"][0]["message"]["role"] == "assistant"
