"""A client that asks for no stream gets a member's whole answer: the node asks the member for a
whole answer too (seen in the member's own access log), with the same failover before it."""

from __future__ import annotations

import gc
import socket
import threading
from pathlib import Path

import httpx
import pytest

from tests.cloud.cloud_servers import llama_server, llama_settings, running
from tests.router import hybrid_helpers as hy

pytestmark = pytest.mark.slow

URL = "/v1/chat/completions"


def test_a_non_streamed_request_reaches_the_member_whole_and_a_5xx_moves_to_the_other_member(tmp_path: Path) -> None:
    broken = hy.RecordingServer([("send", b'{"error": "boom"}')], status="500 Internal Server Error",
                                content_type="application/json")
    good = hy.RecordingServer(hy.good_stream("whole ", "answer"))
    try:
        members = [broken.settings("broken"), good.settings("good")]  # a tie goes to the first: broken
        with hy.node(tmp_path, members, cloud={"retries": 1}) as (base, app):
            body = {"model": "cloud", "messages": hy.ASK, "max_tokens": 8, "temperature": 0}
            reply = httpx.post(base + URL, json=body, headers={"x-request-id": "whole-1"}, timeout=120)
            assert reply.status_code == 200
            assert reply.json()["choices"][0]["message"]["content"] == "whole answer"
            assert reply.json()["choices"][0]["finish_reason"] == "stop"
            assert (reply.headers["x-edgeroute-route"], reply.headers["x-edgeroute-fallback"]) == ("cloud", "cloud->cloud")
            assert reply.headers["x-request-id"] == "whole-1"
            # Both members were asked for a whole answer, with the node's request id.
            assert [m["stream"] for m in (*broken.access_log, *good.access_log)] == [False, False]
            assert "stream_options" not in good.access_log[0]
            assert b"x-request-id: whole-1" in good.heads[-1]
            row = hy.decisions(app)[0]
            assert (row.route, row.fallback, row.member, row.status) == ("cloud", "cloud->cloud", "good", "ok")
            scrape = httpx.get(base + "/metrics").text
            assert 'edgeroute_pool_events_total{kind="failure",member="broken"} 1.0' in scrape
            assert 'edgeroute_pool_events_total{kind="success",member="good"} 1.0' in scrape
            # The heap the node started with is frozen out of collections; the pauses are timed.
            assert gc.get_freeze_count() > 0
            assert 'edgeroute_gc_pause_seconds_count{generation="0"}' in scrape
            # A streamed client still streams from the member.
            good.script = hy.good_stream("streamed ", "answer")
            _, lines = hy.sse_lines(base, {**body, "stream": True})
            assert hy.text_of(lines) == "streamed answer"
            assert good.access_log[-1]["stream"] is True
            assert good.access_log[-1]["stream_options"] == {"include_usage": True}
    finally:
        broken.close()
        good.close()
    assert gc.get_freeze_count() == 0  # the node's close unfroze it


def test_a_member_killed_before_a_whole_request_the_other_member_answers(tmp_path: Path) -> None:
    proc = llama_server(tmp_path, name="victim")
    survivor = hy.RecordingServer(hy.good_stream("from ", "the ", "survivor"))
    try:
        with running(proc):
            members = [llama_settings(proc, "victim"), survivor.settings("survivor")]
            with hy.node(tmp_path, members, cloud={"retries": 1}) as (base, app):
                # Both passed the node's first health round; the victim dies after it.
                assert [m.healthy for m in app.state.node.pool.status()] == [True, True]
                proc.kill()
                body = {"model": "cloud", "messages": hy.ASK, "max_tokens": 4, "temperature": 0}
                reply = httpx.post(base + URL, json=body, timeout=120)
                assert reply.status_code == 200
                assert reply.json()["choices"][0]["message"]["content"] == "from the survivor"
                assert (reply.headers["x-edgeroute-route"], reply.headers["x-edgeroute-fallback"]) == (
                    "cloud", "cloud->cloud")
                assert [m["stream"] for m in survivor.access_log] == [False]
                assert app.state.node.pool.status()[0].last_error.startswith("member victim is unreachable")
                assert hy.decisions(app)[0].member == "survivor"
    finally:
        survivor.close()


class _SlowMember(hy.RecordingServer):
    """Reads a completion request, then answers nothing: it notes when the node lets go of it."""

    def __init__(self) -> None:
        self.released = threading.Event()
        super().__init__([])

    def respond(self, conn: socket.socket, script: object, content_type: str | None = None) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        self.released.set()  # EOF or reset: the node closed the connection


def test_a_client_that_leaves_a_whole_request_stops_the_members_work(tmp_path: Path) -> None:
    slow = _SlowMember()
    try:
        with hy.node(tmp_path, [slow.settings("slow")]) as (base, app):
            body = {"model": "cloud", "messages": hy.ASK, "max_tokens": 8, "stream": False}
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(base + URL, json=body, timeout=httpx.Timeout(30, read=1.0))
            assert slow.released.wait(20), "the node kept waiting on the member for a client that left"
            assert [m["stream"] for m in slow.access_log] == [False]
            rows = hy.decisions_once(app)
            assert len(rows) == 1
            row = rows[0]
            assert (row.route, row.status) == ("error", "error")
            assert row.error == "the client closed the connection before the answer was ready"
            assert app.state.node.pool.status()[0].outstanding == 0
    finally:
        slow.close()
