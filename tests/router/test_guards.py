"""The API guards on a real node with one tenant key: the request's id comes before the key's
check, so a refusal carries it too."""

from __future__ import annotations

import re

import httpx


def test_a_refused_key_s_answer_carries_the_client_s_request_id(keyed_node: str) -> None:
    refused = httpx.get(keyed_node + "/v1/models", headers={"x-request-id": "client-7.a:b"}, timeout=10)
    assert refused.status_code == 401
    assert refused.headers["x-request-id"] == "client-7.a:b"
    assert refused.json()["error"]["code"] == "invalid_api_key"


def test_an_insane_request_id_is_replaced_by_a_new_one(keyed_node: str) -> None:
    refused = httpx.get(keyed_node + "/v1/models", headers={"x-request-id": "two words"}, timeout=10)
    assert refused.status_code == 401
    assert re.fullmatch(r"[0-9a-f]{32}", refused.headers["x-request-id"])


def test_a_good_key_passes_with_its_request_id(keyed_node: str) -> None:
    answer = httpx.post(
        keyed_node + "/v1/chat/completions",
        json={"model": "edge", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
        headers={"authorization": "Bearer key-a", "x-request-id": "mine-1"},
        timeout=120,
    )
    assert answer.status_code == 200
    assert answer.headers["x-request-id"] == "mine-1"
    assert answer.json()["id"]
