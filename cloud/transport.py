"""The pool's HTTP transport: httpx over httpcore, with each request sent to a member in one write.

httpcore writes a request's head and its body apart. On a busy machine that costs a member two
wake-ups per request (the head alone, then the body) and the node a second send; on loopback
that was a measurable share of the node's added latency. Here what httpcore writes is held until
it next reads (it reads once the request is out), so the whole request leaves in one send.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

# A body this large is sent at once rather than held (none of the pool's requests come near it).
_HOLD_AT_MOST = 64 * 1024


class _OneWriteStream(httpcore.AsyncNetworkStream):
    """A connection whose writes are held until the next read (or close, or TLS upgrade)."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._held: list[bytes] = []
        self._size = 0

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._held.append(buffer)
        self._size += len(buffer)
        if self._size >= _HOLD_AT_MOST:
            await self._flush(timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush(timeout)
        return await self._stream.read(max_bytes, timeout)

    async def _flush(self, timeout: float | None) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held.clear()
            self._size = 0
            await self._stream.write(data, timeout)

    async def aclose(self) -> None:
        self._held.clear()  # a request never followed by a read was abandoned: nothing to send
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        await self._flush(timeout)
        return _OneWriteStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _OneWriteBackend(httpcore.AsyncNetworkBackend):
    """Connections of ``backend`` (httpcore's asyncio one by default) that write once per request."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._backend = backend or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _OneWriteStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _OneWriteStream(await self._backend.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _OneWriteTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request and response conversion, error mapping) over a connection
    pool built with the one-write backend."""

    def __init__(self, limits: httpx.Limits, backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        # Not super().__init__: it would build a pool of its own; httpx's transport reads its pool
        # from ``_pool`` (httpx is pinned; tests/cloud/test_transport.py fails if that changes).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_OneWriteBackend(backend),
        )


def member_transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport | None:
    """The transport for a member's client; None (httpx's default) where the environment names a
    proxy, because httpx applies the environment's proxies only to clients without their own."""
    if urllib.request.getproxies():
        return None
    return _OneWriteTransport(limits)
