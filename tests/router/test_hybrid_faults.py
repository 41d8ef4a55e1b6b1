"""More of the hybrid node against members on loopback: a second member takes over (mid-stream
and before the first token), malformed and silent members, tier-aware cache answers, and steering
with model aliases and the body's privacy flag."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.cloud.cloud_servers import chat_chunk, llama_server, llama_settings, running, sse
from tests.router import hybrid_helpers as hy

pytestmark = pytest.mark.slow


def test_member_killed_mid_stream_continues_on_the_other_member_from_the_partial(tmp_path: Path) -> None:
    proc = llama_server(tmp_path, name="victim")
    survivor = hy.RecordingServer(hy.good_stream(" and", " done."))
    try:
        with running(proc):
            # On a tie the pool takes the first member listed: the real llama.cpp server.
            members = [llama_settings(proc, "victim"), survivor.settings("survivor")]
            with hy.node(tmp_path, members) as (base, app):
                lines = hy.stream_through_a_kill(base, proc)
                text = hy.text_of(lines)
                assert text.endswith(" and done.")
                # The survivor was asked to continue the victim's words, not to start again.
                assert len(survivor.access_log) == 1
                sent = survivor.access_log[0]
                prefix = text.removesuffix(" and done.")
                assert prefix, "the victim sent nothing before it died"
                assert sent["messages"][-1] == {"role": "assistant", "content": prefix}
                assert sent["continue_final_message"] is True
                assert sent["add_generation_prompt"] is False
                row = hy.decisions(app)[-1]
                assert (row.route, row.fallback, row.status, row.member) == ("cloud", "cloud->cloud", "ok", "survivor")
    finally:
        survivor.close()


def test_a_prompt_too_long_for_the_edge_and_the_cloud_is_their_400_not_a_503(tmp_path: Path) -> None:
    refusal = {"error": {"message": "this model's maximum context length is 2048 tokens", "type": "invalid_request_error",
                         "param": "messages", "code": "context_length_exceeded"}}
    small = hy.RecordingServer([("send", json.dumps(refusal).encode())], status="400 Bad Request", content_type="application/json")
    try:
        with hy.node(tmp_path, [small.settings("small")]) as (base, app):
            long = [{"role": "user", "content": "word " * 3000}]  # beyond the edge's 2,048 too
            answer = httpx.post(base + "/v1/chat/completions", json={"model": "auto", "messages": long}, timeout=60)
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert (error["code"], error["param"], error["type"]) == ("context_length_exceeded", "messages", "invalid_request_error")
            assert "maximum context length is 2048" in error["message"] and "retry-after" not in answer.headers
            assert len(small.access_log) == 1  # asked once: a refusal of the request is not retried
    finally:
        small.close()


def test_429_before_the_first_token_moves_to_the_other_member(tmp_path: Path) -> None:
    limited = hy.RecordingServer([("send", b'{"error": "slow down"}')], status="429 Too Many Requests",
                              content_type="application/json")
    good = hy.RecordingServer(hy.good_stream("from ", "the ", "other"))
    try:
        with hy.node(tmp_path, [limited.settings("limited"), good.settings("good")], cloud={"retries": 1}) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
            raw = client.chat.completions.with_raw_response.create(model="cloud", messages=hy.ASK, max_tokens=8)
            assert raw.parse().choices[0].message.content == "from the other"
            assert raw.headers["x-edgeroute-route"] == "cloud"
            assert raw.headers["x-edgeroute-fallback"] == "cloud->cloud"
            assert "x-edgeroute-degraded" not in raw.headers
            assert (len(limited.access_log), len(good.access_log)) == (1, 1)
            row = hy.decisions(app)[-1]
            assert (row.fallback, row.member) == ("cloud->cloud", "good")
            scrape = httpx.get(base + "/metrics").text
            assert 'edgeroute_pool_events_total{kind="failure",member="limited"} 1.0' in scrape
            assert 'edgeroute_pool_events_total{kind="started",member="good"} 1.0' in scrape
    finally:
        limited.close()
        good.close()


def test_malformed_chunk_mid_stream_continues_on_the_edge_and_a_malformed_whole_answer_falls_back(
    tmp_path: Path,
) -> None:
    bad = hy.RecordingServer([("send", sse(chat_chunk("Collisions"))), ("send", sse(chat_chunk(" are"))),
                           ("send", b"data: {this is not json\n\n")])
    try:
        with hy.node(tmp_path, [bad.settings("garbled")]) as (base, app):
            body = {"model": "cloud", "messages": hy.ASK, "stream": True, "max_tokens": 16, "temperature": 0}
            headers, lines = hy.sse_lines(base, body)
            text = hy.text_of(lines)
            assert text.startswith("Collisions are") and len(text) > len("Collisions are")
            assert lines.count("[DONE]") == 1
            assert (hy.decisions(app)[0].fallback, hy.decisions(app)[0].degraded) == ("cloud->edge", "cloud-unavailable")
            # Non-streamed, the member is asked for its whole answer: the same garbled event makes
            # the whole body garbled, a failure before any output, so the edge answers from the start.
            plain = httpx.post(base + "/v1/chat/completions", json={**body, "stream": False}, timeout=120)
            assert plain.status_code == 200
            assert bad.access_log[-1]["stream"] is False
            assert plain.json()["choices"][0]["message"]["content"]
            assert plain.headers["x-edgeroute-route"] == "edge"
            assert plain.headers["x-edgeroute-fallback"] == "cloud->edge"
            assert plain.headers["x-edgeroute-degraded"] == "cloud-unavailable"
            assert app.state.node.pool.status()[0].last_error.startswith("member garbled sent a malformed answer")
    finally:
        bad.close()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_silent_member_times_out_to_the_edge(tmp_path: Path, stream: bool) -> None:
    """Streamed, the first-token timeout fires; asked for a whole answer, the whole-answer timeout
    does (the other one is set far above the member's 30 s silence, so it cannot be what fired)."""
    silent = hy.RecordingServer([("sleep", 30)])
    timeouts = {"first_token_timeout_s": 1.5, "whole_timeout_s": 60} if stream else {
        "first_token_timeout_s": 60, "whole_timeout_s": 1.5}
    try:
        with hy.node(tmp_path, [silent.settings("silent")], cloud=timeouts) as (base, app):
            started = time.monotonic()
            body = {"model": "cloud", "messages": hy.ASK, "max_tokens": 8, "stream": stream}
            reply = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
            assert time.monotonic() - started < 20  # the 1.5 s timeout, not the 30 s silence
            assert reply.status_code == 200
            assert (reply.headers["x-edgeroute-route"], reply.headers["x-edgeroute-fallback"]) == ("edge", "cloud->edge")
            assert reply.headers["x-edgeroute-degraded"] == "cloud-unavailable"
            assert len(silent.access_log) == 1
            assert silent.access_log[0]["stream"] is stream
            expected = (
                "member silent was silent for 1.5s before the first token" if stream
                else "member silent gave no whole answer within 1.5s"
            )
            assert app.state.node.pool.status()[0].last_error == expected
    finally:
        silent.close()


def test_an_edge_answer_in_the_cache_is_not_served_to_a_prompt_now_bound_for_the_cloud(tmp_path: Path) -> None:
    member = hy.RecordingServer([("send", b'{"error": "down"}')], status="500 Internal Server Error",
                             content_type="application/json")
    try:
        with hy.node(tmp_path, [member.settings("cloudy")], cache={"enabled": True}) as (base, app):
            body = {"model": "auto", "messages": hy.ASK, "max_tokens": 8, "temperature": 0}
            # The cloud is down: the complex prompt is answered by the edge, and that answer is cached.
            first = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
            assert (first.headers["x-edgeroute-route"], first.headers["x-edgeroute-reason"]) == ("edge", "complex")
            assert first.headers["x-edgeroute-degraded"] == "cloud-unavailable"
            edge_text = first.json()["choices"][0]["message"]["content"]
            # The cloud is back: the same (exact) prompt goes to it, not to the edge's cached answer.
            member.status, member.content_type = "200 OK", "text/event-stream"
            member.script = hy.good_stream("cloud ", "answer")
            second = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
            assert (second.headers["x-edgeroute-route"], second.headers["x-edgeroute-reason"]) == ("cloud", "complex")
            assert second.json()["choices"][0]["message"]["content"] == "cloud answer" != edge_text
            assert hy.decisions(app)[0].cache_refusal == "edge-answer-for-cloud-prompt"
            # The cloud's answer replaced the edge's: now the cache serves it, and says who made it.
            third = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
            assert third.headers["x-edgeroute-route"] == "cache-exact"
            assert third.headers["x-edgeroute-cache-tier"] == "cloud"
            assert third.json()["choices"][0]["message"]["content"] == "cloud answer"
            assert len(member.access_log) == 2
            # A simple prompt the edge answered is still served from the cache: the check is per route.
            hi = {"model": "auto", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0}
            assert httpx.post(base + "/v1/chat/completions", json=hi, timeout=120).headers["x-edgeroute-route"] == "edge"
            runs = app.state.node.embedder.runs
            again = httpx.post(base + "/v1/chat/completions", json=hi, timeout=120)
            assert (again.headers["x-edgeroute-route"], again.headers["x-edgeroute-cache-tier"]) == ("cache-exact", "edge")
            assert app.state.node.embedder.runs == runs  # the stored embedding scored it: no model run
            assert len(member.access_log) == 2
    finally:
        member.close()


def test_model_aliases_steer_and_the_body_privacy_flag_keeps_a_request_home(tmp_path: Path) -> None:
    member = hy.RecordingServer(hy.good_stream("cloud ", "answer"))
    member.models = ["big-model"]
    try:
        with hy.node(tmp_path, [member.settings("cloudy", model="big-model")]) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
            ids = [m.id for m in client.models.list()]
            # The embedding model last: this node loads it for the complexity policy.
            assert ids == ["auto", "edge", "cloud", "smollm2-135m-instruct", "big-model", "all-minilm-l6-v2"]
            hi = [{"role": "user", "content": "Say hi."}]
            to_cloud = client.chat.completions.with_raw_response.create(model="big-model", messages=hi, max_tokens=4)
            assert (to_cloud.headers["x-edgeroute-route"], to_cloud.headers["x-edgeroute-reason"]) == ("cloud", "hint-cloud")
            assert to_cloud.parse().model == "big-model"
            assert member.access_log[-1]["model"] == "big-model"
            to_edge = client.chat.completions.with_raw_response.create(
                model="smollm2-135m-instruct", messages=hy.ASK, max_tokens=4
            )
            assert (to_edge.headers["x-edgeroute-route"], to_edge.headers["x-edgeroute-reason"]) == ("edge", "hint-edge")
            private = client.chat.completions.with_raw_response.create(
                model="big-model", messages=hy.ASK, max_tokens=4, extra_body={"private": True}
            )
            assert (private.headers["x-edgeroute-route"], private.headers["x-edgeroute-reason"]) == ("edge", "private")
            assert len(member.access_log) == 1
            assert hy.decisions(app)[0].private is True
    finally:
        member.close()


def test_a_continuation_after_a_cut_never_exceeds_max_tokens(tmp_path: Path) -> None:
    """Five chunks, then the member cuts the stream: the other member is asked for what is left."""
    pieces = [f"w{i} " for i in range(5)]
    cut = hy.RecordingServer([("send", sse(chat_chunk(p))) for p in pieces] + [("cut",)])
    rest = hy.RecordingServer(hy.good_stream("x ", "y "))
    try:
        members = [cut.settings("cut"), rest.settings("rest")]
        with hy.node(tmp_path, members) as (base, app):
            body = {"model": "cloud", "messages": hy.ASK, "stream": True, "max_tokens": 7,
                    "stream_options": {"include_usage": True}}
            _, lines = hy.sse_lines(base, body)
            assert hy.text_of(lines) == "w0 w1 w2 w3 w4 x y "
            assert lines.count("[DONE]") == 1
            assert rest.access_log[0]["max_tokens"] == 2
            usage = json.loads(lines[-2])["usage"]
            assert usage["completion_tokens"] == 7
            # The real edge continues too, within what is left.
            edge_body = {**body, "max_tokens": 8}
            cut2 = hy.RecordingServer([("send", sse(chat_chunk(p))) for p in pieces] + [("cut",)])
            try:
                with hy.node(tmp_path / "b", [cut2.settings("cut")]) as (base2, _):
                    _, lines2 = hy.sse_lines(base2, edge_body)
                    content = [json.loads(x) for x in lines2 if x != "[DONE]"]
                    tokens = [c for c in content if c["choices"] and c["choices"][0]["delta"].get("content")]
                    assert 5 < len(tokens) <= 8
                    assert content[-1]["usage"]["completion_tokens"] <= 8
                    assert lines2.count("[DONE]") == 1
            finally:
                cut2.close()
    finally:
        cut.close()
        rest.close()
