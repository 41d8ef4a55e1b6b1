"""router.server's connection protocol (uvicorn's httptools one): a request's head is capped in
size and must arrive within the deadline, on a new connection and between requests on a kept one.
A real uvicorn on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from litestar import Litestar, Request, get, post

from router.server import MAX_HEAD_BYTES, guarded
from loadtest.servers import free_port, wait_ready


@get("/healthz", sync_to_thread=False)
def _healthz() -> str:
    return "ok"


@post("/echo-size", status_code=200)
async def _echo_size(request: Request) -> str:
    return str(len(await request.body()))


@contextmanager
def _server(header_timeout_s: float) -> Iterator[int]:
    port = free_port()
    app, protocol = guarded(Litestar([_healthz, _echo_size]), header_timeout_s)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=protocol, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_ready(f"http://127.0.0.1:{port}/healthz", thread.is_alive, 30)
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False


def test_a_head_over_the_cap_is_a_400_and_one_under_it_is_served() -> None:
    with _server(5) as port:
        url = f"http://127.0.0.1:{port}/healthz"
        assert httpx.get(url, headers={"x-pad": "a" * (MAX_HEAD_BYTES - 1024)}).text == "ok"
        refused = httpx.get(url, headers={"x-pad": "a" * (MAX_HEAD_BYTES + 1)})
        assert (refused.status_code, refused.text) == (400, "Invalid HTTP request received.")
        assert httpx.get(url).text == "ok"


def test_a_head_that_does_not_arrive_in_time_loses_its_connection() -> None:
    with _server(0.5) as port:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")  # never finished
            assert _closed_within(slow, 5)


def test_a_kept_connection_serves_requests_while_each_head_comes_in_time() -> None:
    with _server(0.5) as port, socket.create_connection(("127.0.0.1", port)) as conn:
        for _ in range(3):
            conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            conn.settimeout(5)
            assert conn.recv(4096).endswith(b"ok")
            time.sleep(0.3)  # idle, but less than the deadline
        # Idle past the deadline after its last answer: the connection is let go.
        assert _closed_within(conn, 5)


def test_a_body_sent_with_its_head_does_not_count_against_the_head_cap() -> None:
    """Head and a 64 KiB body in one write: the cap is the head's alone."""
    body = b"a" * (4 * MAX_HEAD_BYTES)
    head = f"POST /echo-size HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n".encode()
    with _server(5) as port, socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(head + body)
        conn.settimeout(5)
        answer = b""
        while not answer.endswith(str(len(body)).encode()):
            piece = conn.recv(4096)
            assert piece, answer
            answer += piece
        assert answer.startswith(b"HTTP/1.1 200")
