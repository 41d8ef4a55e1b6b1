"""The pool's transport sends each request to a member in one write (head and body together)."""

from __future__ import annotations

import json
from typing import Any

import httpcore
import httpx
import pytest
from cloud_servers import ScriptedServer

from cloud.transport import _OneWriteTransport, member_transport


class _Recording(httpcore.AsyncNetworkBackend):
    """httpcore's asyncio backend, keeping every write its connections make."""

    def __init__(self) -> None:
        self._backend = httpcore.AnyIOBackend()
        self.writes: list[bytes] = []

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(*args, **kwargs)
        writes = self.writes

        class Stream(httpcore.AsyncNetworkStream):
            async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
                return await stream.read(max_bytes, timeout)

            async def write(self, buffer: bytes, timeout: float | None = None) -> None:
                writes.append(buffer)
                await stream.write(buffer, timeout)

            async def aclose(self) -> None:
                await stream.aclose()

            def get_extra_info(self, info: str) -> Any:
                return stream.get_extra_info(info)

        return Stream()

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _KeepAliveServer(ScriptedServer):
    """Answers every request on a connection with one small JSON body, keeping the connection."""

    def handle(self, conn: Any) -> None:
        body = json.dumps({"ok": True}).encode()
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        try:
            while self._read_request(conn)[0]:
                conn.sendall(head.encode() + body)
        except OSError:
            pass


async def test_each_request_leaves_in_one_write_on_a_kept_alive_connection() -> None:
    server = _KeepAliveServer([])
    recording = _Recording()
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    try:
        async with httpx.AsyncClient(transport=_OneWriteTransport(limits, recording)) as client:
            for i in range(3):
                reply = await client.post(f"http://127.0.0.1:{server.port}/v1/chat/completions", json={"n": i})
                assert reply.json() == {"ok": True}
        assert server.connections == 1
        assert len(recording.writes) == 3
        for i, write in enumerate(recording.writes):
            head, _, body = write.partition(b"\r\n\r\n")
            assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
            assert json.loads(body) == {"n": i}
    finally:
        server.close()


def test_a_proxy_in_the_environment_keeps_httpx_default_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = httpx.Limits(max_connections=4)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(member_transport(limits), _OneWriteTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert member_transport(limits) is None
