"""The member server (1 rank) over real HTTP: the OpenAI API, vLLM's extension fields, /health, /metrics."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from cloud.health import parse_load
from cloud.local import LocalMember

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def _sse_deltas(client: httpx.Client, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    events: list[dict[str, Any]] = []
    raw: list[str] = []
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                raw.append(line[6:])
                if line[6:] != "[DONE]":
                    events.append(json.loads(line[6:]))
    return events, raw


@pytest.fixture(scope="module")
def http(member: LocalMember) -> httpx.Client:
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as client:
        yield client


def test_chat_stream_and_non_stream_agree(http: httpx.Client, member: LocalMember) -> None:
    body = {
        "model": member.model,
        "messages": QUESTION,
        "temperature": 0,
        "max_tokens": 24,
        "stream_options": {"include_usage": True},
    }
    whole = http.post("/v1/chat/completions", json=body).json()
    answer = whole["choices"][0]["message"]["content"]
    assert "Paris" in answer
    assert whole["choices"][0]["finish_reason"] == "stop"
    events, raw = _sse_deltas(http, body)
    assert raw[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == answer
    assert events[-2]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"] == [] and events[-1]["usage"] == whole["usage"]
    assert whole["usage"]["completion_tokens"] == len(
        [e for e in events[1:-2] if e["choices"][0]["delta"]["content"]]
    )


def test_continue_final_message_continues_the_answer(http: httpx.Client, member: LocalMember) -> None:
    body = {"model": member.model, "messages": QUESTION, "temperature": 0, "max_tokens": 24}
    full = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
    prefix = full[: full.index("France") + len("France")]
    cont = http.post(
        "/v1/chat/completions",
        json={
            **body,
            "messages": [*QUESTION, {"role": "assistant", "content": prefix}],
            "continue_final_message": True,
            "add_generation_prompt": False,
        },
    ).json()["choices"][0]["message"]["content"]
    assert prefix + cont == full


def test_openai_sdk_client_text_completion_and_stop(member: LocalMember) -> None:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{member.port}/v1", api_key="unused", max_retries=0)
    listed = [m.id for m in client.models.list().data]
    assert listed == [member.model]
    out = client.completions.create(model=member.model, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0)
    text = out.choices[0].text
    stopped = client.completions.create(
        model=member.model, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0, stop=[" 7"]
    )
    assert stopped.choices[0].finish_reason == "stop"
    assert text.startswith(stopped.choices[0].text) and " 7" not in stopped.choices[0].text
    assert (
        out.usage is not None
        and out.usage.completion_tokens == 12
        and out.choices[0].finish_reason == "length"
    )


def test_errors_use_openai_bodies_and_vllm_statuses(http: httpx.Client, member: LocalMember) -> None:
    wrong = http.post("/v1/chat/completions", json={"model": "nope", "messages": QUESTION})
    assert wrong.status_code == 404 and wrong.json()["error"]["code"] == "model_not_found"
    too_long = http.post(
        "/v1/chat/completions", json={"model": member.model, "messages": QUESTION, "max_tokens": 5000}
    )
    assert too_long.status_code == 400
    assert too_long.json()["error"]["code"] == "context_length_exceeded"
    bad = http.post("/v1/chat/completions", json={"model": member.model, "messages": []})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    bad_continue = http.post(
        "/v1/chat/completions",
        json={"model": member.model, "messages": QUESTION, "continue_final_message": True},
    )
    assert (
        bad_continue.status_code == 400 and bad_continue.json()["error"]["param"] == "continue_final_message"
    )


def test_health_and_vllm_metrics_follow_the_load(http: httpx.Client, member: LocalMember) -> None:
    health = http.get("/health")
    assert health.status_code == 200
    assert health.json()["dtype"] == "bfloat16"  # the default: half the fp32 twin's memory
    assert parse_load(http.get("/metrics").text) == (0, 0)
    # A prompt that keeps going, so the request is still decoding when /metrics is read.
    body = {
        "model": member.model,
        "prompt": "1, 2, 3, 4,",
        "max_tokens": 300,
        "temperature": 0,
        "stream": True,
    }
    with http.stream("POST", "/v1/completions", json=body) as resp:
        lines = resp.iter_lines()
        assert next(lines).startswith("data: ")  # the first token: decoding now
        assert parse_load(http.get("/metrics").text) == (1, 0)
    # Leaving the stream early cancels the generation on the member.
    deadline = time.monotonic() + 60
    while parse_load(http.get("/metrics").text) != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert parse_load(http.get("/metrics").text) == (0, 0)
    text = http.get("/metrics").text
    for name in (
        "vllm:time_to_first_token_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
    ):
        assert name in text
