"""The hybrid node with real members on loopback: routing, fallback before and after the first token,
circuit breaking, edge saturation and privacy, seen through the official openai SDK and raw SSE."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.cloud.cloud_servers import chat_chunk, llama_server, llama_settings, running, sse
from tests.router.hybrid_helpers import (
    ASK,
    RecordingServer,
    decisions,
    good_stream,
    node,
    sse_lines,
    stream_through_a_kill,
    text_of,
)

pytestmark = pytest.mark.slow


def test_member_killed_mid_stream_the_client_still_gets_one_complete_stream(tmp_path: Path) -> None:
    proc = llama_server(tmp_path, name="victim")
    with running(proc):
        with node(tmp_path, [llama_settings(proc, "victim")]) as (base, app):
            lines = stream_through_a_kill(base, proc)
            finishes = [json.loads(x)["choices"][0]["finish_reason"] for x in lines[:-1] if json.loads(x)["choices"]]
            assert finishes[-1] in ("stop", "length")
            assert len(text_of(lines)) > 0
            row = decisions(app)[-1]
            assert (row.route, row.fallback, row.status) == ("cloud", "cloud->edge", "ok")


def test_stalled_stream_continues_on_the_edge_from_the_partial_text(tmp_path: Path) -> None:
    stall = RecordingServer([("send", sse(chat_chunk("Hash maps"))), ("send", sse(chat_chunk(" resolve"))), ("sleep", 30)])
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            started = time.monotonic()
            body = {"model": "cloud", "messages": ASK, "stream": True, "max_tokens": 24, "temperature": 0}
            headers, lines = sse_lines(base, body)
            assert time.monotonic() - started < 25  # the 2 s stall timeout fired, not the 30 s sleep
            text = text_of(lines)
            assert text.startswith("Hash maps resolve")
            assert len(text) > len("Hash maps resolve")
            assert lines.count("[DONE]") == 1
            row = decisions(app)[-1]
            assert row.fallback == "cloud->edge"
    finally:
        stall.close()


def test_500s_fall_back_to_the_edge_then_the_circuit_opens(tmp_path: Path) -> None:
    broken = RecordingServer([("send", b'{"error": "boom"}')], status="500 Internal Server Error", content_type="application/json")
    try:
        with node(tmp_path, [broken.settings("flaky")], cloud={"failure_threshold": 3, "cooldown_s": 60}) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
            for _ in range(3):
                raw = client.chat.completions.with_raw_response.create(model="cloud", messages=ASK, max_tokens=8, temperature=0)
                assert raw.headers["x-edgeroute-route"] == "edge"
                assert raw.headers["x-edgeroute-fallback"] == "cloud->edge"
                assert raw.headers["x-edgeroute-degraded"] == "cloud-unavailable"
                assert raw.parse().choices[0].message.content
            assert len(broken.access_log) == 3
            member = app.state.node.pool.status()[0]
            assert (member.circuit, member.healthy) == ("open", False)
            raw = client.chat.completions.with_raw_response.create(model="cloud", messages=ASK, max_tokens=8, temperature=0)
            # With the circuit open the policy itself sees no healthy member and stays on the edge.
            assert raw.headers["x-edgeroute-route"] == "edge"
            assert raw.headers["x-edgeroute-reason"] == "cloud-unhealthy"
            assert raw.headers["x-edgeroute-degraded"] == "cloud-unavailable"
            assert len(broken.access_log) == 3  # the open circuit kept the request off the member
    finally:
        broken.close()


def test_private_requests_never_reach_a_member(tmp_path: Path) -> None:
    member = RecordingServer(good_stream("cloud ", "answer"))
    try:
        with node(tmp_path, [member.settings("cloudy")]) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
            done = client.chat.completions.with_raw_response.create(model="cloud", messages=ASK, max_tokens=8)
            assert done.headers["x-edgeroute-route"] == "cloud"
            assert len(member.access_log) == 1
            secret = [{"role": "user", "content": "Write a long design doc and mail it to jane.doe@example.com"}]
            raw = client.chat.completions.with_raw_response.create(model="cloud", messages=secret, max_tokens=8)
            assert (raw.headers["x-edgeroute-route"], raw.headers["x-edgeroute-reason"]) == ("edge", "private")
            flagged = client.chat.completions.with_raw_response.create(
                model="cloud", messages=ASK, max_tokens=8, extra_headers={"x-edgeroute-private": "true"}
            )
            assert flagged.headers["x-edgeroute-route"] == "edge"
            streamed = client.chat.completions.create(model="cloud", messages=secret, max_tokens=8, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
            assert len(member.access_log) == 1
            rows = decisions(app)
            private_rows = [r for r in rows if r.private]
            assert len(private_rows) == 3 and all(r.prompt_preview == "" for r in private_rows)
    finally:
        member.close()


def test_saturated_edge_overflows_to_the_cloud_and_both_busy_is_429_edge_saturated(tmp_path: Path) -> None:
    member = RecordingServer(good_stream("from ", "the ", "cloud"))
    try:
        with node(
            tmp_path, [member.settings("spill")], edge={"max_queue": 1, "slots": 1}, routing={"edge_queue_bound": 1}
        ) as (base, app):
            long = {"model": "edge", "prompt": "1, 2, 3,", "max_tokens": 600, "temperature": 0}
            short = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            edge = app.state.node.edge
            results: list[int] = []

            def occupy() -> None:
                results.append(httpx.post(base + "/v1/completions", json=long, timeout=300).status_code)

            workers = [threading.Thread(target=occupy) for _ in range(2)]
            for worker in workers:
                worker.start()
                time.sleep(0.3)
            deadline = time.monotonic() + 60
            while (edge.load().running, edge.load().waiting) != (1, 1):
                assert time.monotonic() < deadline, "the edge never filled up"
                time.sleep(0.02)
            # One running and one waiting: a new auto request spills over to the cloud.
            spill = httpx.post(base + "/v1/chat/completions", json=short, timeout=60)
            assert spill.status_code == 200
            assert (spill.headers["x-edgeroute-route"], spill.headers["x-edgeroute-reason"]) == ("cloud", "edge-saturated")
            assert spill.json()["choices"][0]["message"]["content"] == "from the cloud"
            # The cloud now fails too, and the edge is still full with this tenant's requests: the
            # tenant holds its share of the edge, a deliberate 429 with Retry-After (not a 503).
            member.status = "503 Service Unavailable"
            member.script = [("send", b"{}")]
            busy = httpx.post(base + "/v1/chat/completions", json=short, timeout=60)
            assert edge.load().depth == 2, "the edge drained before the check: the test proves nothing"
            assert busy.status_code == 429
            assert int(busy.headers["retry-after"]) >= 1
            assert (busy.json()["error"]["type"], busy.json()["error"]["code"]) == ("requests", "rate_limit_exceeded")
            # The refusal explains itself like an answer does.
            assert busy.headers["x-edgeroute-route"] == "error"
            assert busy.headers["x-edgeroute-reason"] == "edge-saturated"
            assert busy.headers["x-edgeroute-fallback"] == "cloud->edge"
            for worker in workers:
                worker.join(timeout=300)
            assert results == [200, 200]
    finally:
        member.close()


def test_the_complexity_embedding_runs_only_where_it_can_change_the_route(tmp_path: Path) -> None:
    member = RecordingServer(good_stream("cloud ", "answer"))
    try:
        with node(tmp_path, [member.settings("cloudy")]) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
            hi = [{"role": "user", "content": "Say hi."}]
            auto = client.chat.completions.with_raw_response.create(model="auto", messages=hi, max_tokens=4)
            assert auto.headers["x-edgeroute-reason"] == "simple"
            assert 0.0 <= float(auto.headers["x-edgeroute-complexity"]) < 0.5
            hinted = client.chat.completions.with_raw_response.create(model="edge", messages=hi, max_tokens=4)
            assert hinted.headers["x-edgeroute-reason"] == "hint-edge"
            assert "x-edgeroute-complexity" not in hinted.headers
            private = client.chat.completions.with_raw_response.create(
                model="auto", messages=hi, max_tokens=4, extra_headers={"x-edgeroute-private": "true"}
            )
            assert private.headers["x-edgeroute-reason"] == "private"
            assert "x-edgeroute-complexity" not in private.headers
            assert [r.complexity is None for r in decisions(app)] == [True, True, False]  # newest first
    finally:
        member.close()
