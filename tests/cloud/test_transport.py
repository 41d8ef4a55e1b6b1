"""HTTP to a member (cloud/transport.py): aiohttp, each request sent in one write on a kept-alive
connection, errors in httpx's terms, the environment's proxy honoured, and event streams read by
httpx-sse straight from aiohttp's body."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest
from httpx_sse import SSEError
from cloud_servers import ScriptedServer

from cloud.transport import MemberHTTP, events


class _CountingSocket:
    """A connection whose reads are counted (socket objects do not take new attributes)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self.reads = 0

    def recv(self, size: int) -> bytes:
        self.reads += 1
        return self._conn.recv(size)


class _KeepAliveServer(ScriptedServer):
    """Answers every request on a connection with one small JSON body, keeping the connection, and
    keeps each request's body and the reads it took to arrive whole."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.bodies: list[Any] = []
        super().__init__([])

    def handle(self, conn: Any) -> None:
        body = json.dumps({"ok": True}).encode()
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        counting = _CountingSocket(conn)
        try:
            while True:
                counting.reads = 0
                path, request_body = self._read_request(counting)  # type: ignore[arg-type]
                if not path:
                    return
                self.reads.append(counting.reads)
                self.bodies.append(json.loads(request_body))
                conn.sendall(head.encode() + body)
        except OSError:
            pass


def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def _http(base: str, max_connections: int = 1) -> MemberHTTP:
    return MemberHTTP(base, {}, max_connections=max_connections, connect_timeout_s=2)


async def test_requests_reuse_one_connection_and_each_arrives_in_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy(monkeypatch)
    server = _KeepAliveServer()
    http = _http(f"http://127.0.0.1:{server.port}/v1")
    try:
        for i in range(3):
            reply = await http.request("POST", "/chat/completions", json={"n": i}, headers={"x-request-id": f"r{i}"})
            assert (reply.status_code, reply.json()) == (200, {"ok": True})
        assert server.connections == 1
        # Head and body left in one send: the member reads each request once.
        assert server.reads == [1, 1, 1]
        assert server.bodies == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert all(head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") for head in server.heads)
        assert [b"x-request-id: r0" in head.lower() for head in server.heads] == [True, False, False]
    finally:
        await http.aclose()
        server.close()


async def test_a_refused_connection_is_an_httpx_transport_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx-aiohttp's map makes it ``httpx.ConnectTimeout`` (it checks aiohttp's base connection
    error first); the member client reads both connect errors as "unreachable"."""
    _no_proxy(monkeypatch)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = _http(f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(httpx.ConnectTimeout):
            await http.request("POST", "/chat/completions", json={})
    finally:
        await http.aclose()


async def test_a_proxy_in_the_environment_carries_the_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy(monkeypatch)
    proxy = _KeepAliveServer()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    http = _http("http://member.invalid:8000/v1")
    try:
        reply = await http.request("POST", "/chat/completions", json={"n": 1})
        assert reply.json() == {"ok": True}
        # The proxy was asked for the member's URL (absolute form), the body passed on.
        assert proxy.heads[0].startswith(b"POST http://member.invalid:8000/v1/chat/completions HTTP/1.1\r\n")
        assert proxy.bodies == [{"n": 1}]
    finally:
        await http.aclose()
        proxy.close()


async def _events(server: ScriptedServer) -> list[tuple[str, str]]:
    http = _http(f"http://127.0.0.1:{server.port}/v1")
    try:
        async with http.stream("POST", "/chat/completions", json={}) as response:
            return [(e.event, e.data) async for e in events(response)]
    finally:
        await http.aclose()
        server.close()


async def test_events_are_whole_when_a_character_and_a_line_are_split_between_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy(monkeypatch)
    text = json.dumps({"content": "caf\u00e9 \U0001F600"}, ensure_ascii=False).encode()
    cut = text.index("\U0001F600".encode()) + 2  # inside the emoji's four bytes
    server = ScriptedServer([
        ("send", b": ping\n\ndata: " + text[:cut]),
        ("sleep", 0.05),
        ("send", text[cut:] + b"\n"),
        ("sleep", 0.05),
        ("send", b"\nevent: note\ndata: a\ndata: b\n\ndata: [DONE]\n\n"),
    ])
    assert await _events(server) == [
        ("message", json.dumps({"content": "caf\u00e9 \U0001F600"}, ensure_ascii=False)),
        ("note", "a\nb"),
        ("message", "[DONE]"),
    ]


async def test_a_stream_cut_mid_body_is_an_httpx_read_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy(monkeypatch)
    server = ScriptedServer([("send", b'data: {"a": 1}\n\n'), ("cut",)])  # reset, mid-body
    with pytest.raises(httpx.ReadError, match="payload is not completed"):
        await _events(server)


async def test_an_answer_that_is_not_an_event_stream_is_an_sse_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxy(monkeypatch)
    server = ScriptedServer([("send", b'{"ok": true}')], content_type="application/json")
    with pytest.raises(SSEError, match="application/json"):
        await _events(server)
