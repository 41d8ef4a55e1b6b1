"""An edge-only node under more than it can take: refusals are 429s that say edge-saturated, and a non-streamed
client that gives up stops its generation (a real node and model on loopback)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from edgeroute.app import create_app
from router import load_settings
from loadtest.servers import serve_app

pytestmark = pytest.mark.slow

LONG = {"model": "edge", "max_tokens": 1500, "temperature": 0,
        "messages": [{"role": "user", "content": "Write a very long story about a lighthouse keeper."}]}


@pytest.fixture(scope="module")
def small_edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, object]]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("overload"),
        edge={"max_queue": 1, "slots": 1},
        cloud={"local_member": False},
        cache={"enabled": False},
    )
    app = create_app(settings)
    with serve_app(app) as base:
        yield base, app


def load(base: str) -> tuple[int, int]:
    edge = httpx.get(base + "/healthz", timeout=10).json()["edge"]
    return edge["running"], edge["waiting"]


def wait_for(base: str, want: tuple[int, int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while load(base) != want:
        assert time.monotonic() < deadline, f"edge load never became {want}: {load(base)}"
        time.sleep(0.02)


def test_a_non_streamed_client_that_gives_up_stops_the_edge(small_edge: tuple[str, object]) -> None:
    base, _ = small_edge
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(base + "/v1/chat/completions", json=LONG, timeout=httpx.Timeout(60, read=1.0))
    # 1,500 tokens would take the edge many seconds; the job was cancelled instead.
    wait_for(base, (0, 0), timeout=5)


def raw_request(base: str, body: dict[str, object]) -> socket.socket:
    """Send a request and leave the connection open (closing it is the client giving up)."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    data = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(data)}\r\n\r\n".encode() + data
    )
    return sock


def test_the_edge_queue_bound_is_a_429_that_says_edge_saturated(small_edge: tuple[str, object]) -> None:
    base, _ = small_edge
    socks = []
    try:
        for _ in range(2):  # one running, one waiting: the queue bound (max_queue = 1)
            socks.append(raw_request(base, LONG))
            time.sleep(0.3)
        wait_for(base, (1, 1))
        busy = httpx.post(base + "/v1/chat/completions", json={**LONG, "max_tokens": 4}, timeout=30)
        # The only tenant holds the whole queue, its share: a deliberate 429, not a 503.
        assert busy.status_code == 429
        assert int(busy.headers["retry-after"]) >= 1
        assert busy.headers["x-edgeroute-route"] == "error"
        assert busy.headers["x-edgeroute-reason"] == "edge-saturated"
        error = busy.json()["error"]
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
        assert error["message"].startswith("edge saturated: the edge queue is full: 1 of this tenant's")
    finally:
        for sock in socks:
            sock.close()  # both non-streamed requests are cancelled with their connections
    wait_for(base, (0, 0), timeout=10)
