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
