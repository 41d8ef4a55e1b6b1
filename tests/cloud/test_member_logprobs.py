"""Log probabilities from the member server (real model over HTTP)."""

from __future__ import annotations

import httpx

from cloud.local import LocalMember

ASK = [{"role": "user", "content": "Count from one to five."}]


def test_a_member_reports_logprobs_too(member: LocalMember) -> None:
    body = {"model": member.model, "messages": ASK, "temperature": 0, "max_tokens": 8, "logprobs": True, "top_logprobs": 2}
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as http:
        choice = http.post("/v1/chat/completions", json=body).json()["choices"][0]
    entries = choice["logprobs"]["content"]
    assert "".join(e["token"] for e in entries) == choice["message"]["content"]
    assert all(e["top_logprobs"][0]["token"] == e["token"] and len(e["top_logprobs"]) == 2 for e in entries)


def test_under_a_schema_the_logprobs_are_still_the_models_own(member: LocalMember) -> None:
    """The grammar masks the choice, not the distribution reported: the alternatives include
    tokens the schema forbids, as the edge reports them."""
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    body = {
        "model": member.model, "messages": ASK, "temperature": 0, "max_tokens": 4, "logprobs": True, "top_logprobs": 5,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    }
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as http:
        shaped = http.post("/v1/chat/completions", json=body).json()["choices"][0]["logprobs"]["content"][0]
        body.pop("response_format")
        free = http.post("/v1/chat/completions", json=body).json()["choices"][0]["logprobs"]["content"][0]
    assert shaped["token"].startswith("{")
    # The same step's distribution with or without the schema: the model's own.
    assert shaped["top_logprobs"] == free["top_logprobs"]
