"""Running the node's app under uvicorn: connection timeouts and a graceful shutdown.

- Requests are parsed by uvicorn's httptools protocol (llhttp, in C). A new connection must send
  its request's headers within ``server.header_timeout_s`` (uvicorn has no such timer: a client
  trickling a header byte at a time held a connection for ever), and a head may take 16 KiB;
  idle keep-alive connections close after ``server.keep_alive_s``; the body has its own deadline
  (:mod:`router.admission`).
- SIGTERM (or Ctrl-C) drains: new requests get 503 with ``retry-after`` (the socket stays open, so
  clients get an answer, not a refused connection), requests in flight may finish within
  ``server.drain_s``, streams still running then end with an error event and ``[DONE]``; then
  uvicorn stops, the lifespan closes the node (a local member is stopped), and the process exits 0.
  A second signal stops at once.
- What uvicorn writes on a connection within one turn of the event loop (a response's head, body
  and end) leaves in one send.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from contextvars import ContextVar
from types import FrameType
from typing import Any

import uvicorn
from litestar import Litestar
from litestar.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from .admission import Drain
from .settings import ServerSettings

log = logging.getLogger(__name__)
# The most a request's line and headers may take (h11's cap, which uvicorn's h11 server applied).
MAX_HEAD_BYTES = 16 * 1024


class _OneWritePerTurn:
    """A connection's transport whose writes within one turn of the event loop leave as one send.

    uvicorn writes a response's head, its body and its end apart; sent apart, each piece wakes the
    client on its own (and costs a send), which on loopback was a measurable share of a request's
    latency. Held until the loop's next turn, they go together; nothing waits longer than that.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._held:
            self._loop.call_soon(self._flush)
        self._held.append(bytes(data))

    def _flush(self) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


# The connection whose data is being read: an ASGI task started while its head is parsed
# inherits this (uvicorn copies the context into the task unless ``reset_contextvars`` is set).
_CONNECTION: ContextVar[_HeadGuard | None] = ContextVar("edgeroute_connection", default=None)
_REFUSED = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: 30\r\n\r\nInvalid HTTP request received."
)


class _HeadGuard(asyncio.Protocol):
    """uvicorn's httptools protocol (llhttp, in C), wrapped: a deadline and a size cap for the
    head of each request on a connection, and writes held to one per turn.

    h11, which uvicorn also offers, caps a head at 16 KiB but parses in Python: it cost the node
    ~0.3-0.5 ms of CPU per request more on this project's 2-core machine. The head's end is found
    by its blank line; the requests in progress are told by :func:`guarded_app`.
    """

    def __init__(self, inner: asyncio.Protocol, header_timeout_s: float) -> None:
        self._inner, self._timeout_s = inner, header_timeout_s
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._awaiting = True  # a head is due: counted and timed
        self._head_bytes, self._tail = 0, b""
        self._busy = 0  # requests of this connection in the app

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not asyncio's class
        self._inner.connection_made(_OneWritePerTurn(self._transport, asyncio.get_running_loop()))  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._awaiting and not self._count(data):
            assert self._transport is not None
            self._transport.write(_REFUSED)  # as uvicorn answers a head its parser refuses
            self._transport.close()
            return
        token = _CONNECTION.set(self)
        try:
            self._inner.data_received(data)
        finally:
            _CONNECTION.reset(token)

    def _count(self, data: bytes) -> bool:
        """Whether the head due is still within its cap (and, at its blank line, done)."""
        seen = self._tail + data
        end = seen.find(b"\r\n\r\n")
        if end >= 0:
            self._awaiting = False
            self._cancel()  # the head came: the body has its own deadline
            return self._head_bytes + end - len(self._tail) + 4 <= MAX_HEAD_BYTES
        self._head_bytes += len(data)
        self._tail = seen[-3:]
        return self._head_bytes <= MAX_HEAD_BYTES

    def request_started(self) -> None:
        self._busy += 1
        self._awaiting = False
        self._cancel()

    def request_ended(self) -> None:
        self._busy -= 1
        if self._busy == 0 and self._transport is not None and not self._transport.is_closing():
            self._awaiting, self._head_bytes, self._tail = True, 0, b""
            self._arm()

    def _arm(self) -> None:
        self._cancel()
        self._timer = asyncio.get_running_loop().call_later(self._timeout_s, self._late)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _late(self) -> None:
        self._timer = None
        if self._awaiting and self._busy == 0 and self._transport is not None:
            self._transport.close()

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def guarded(app: ASGIApp, header_timeout_s: float) -> tuple[ASGIApp, Any]:
    """``app`` and the ``http`` protocol for uvicorn.Config that guard each request's head."""
    # Resolved as uvicorn resolves ``http="httptools"`` itself.
    inner = import_from_string(HTTP_PROTOCOLS["httptools"])

    def protocol(**kwargs: Any) -> asyncio.Protocol:
        return _HeadGuard(inner(**kwargs), header_timeout_s)

    async def guarded_app(scope: Scope, receive: Receive, send: Send) -> None:
        connection = _CONNECTION.get() if scope["type"] == "http" else None
        if connection is None:
            return await app(scope, receive, send)
        connection.request_started()
        try:
            await app(scope, receive, send)
        finally:
            connection.request_ended()

    return guarded_app, protocol


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with a drain between the first signal and the shutdown."""

    def __init__(self, config: uvicorn.Config, drain: Drain, drain_s: float) -> None:
        super().__init__(config)
        self._drain = drain
        self._drain_s = drain_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not uvicorn's: it would re-raise the signal after shutdown, and a drained node exits 0.
        if self._loop is None or self._draining:
            self.should_exit = True
            self.force_exit = self._draining
            return
        log.info("%s: draining (up to %.0fs for %d requests in flight)",
                 signal.Signals(sig).name, self._drain_s, self._drain.in_flight)
        self._draining = True
        self._loop.call_soon_threadsafe(self._loop.create_task, self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        finished = await self._drain.drain(self._drain_s)
        if not finished:
            log.warning("drain deadline passed: %d requests ended early", self._drain.in_flight)
        self.should_exit = True


def serve(app: Litestar, server: ServerSettings, *, log_level: str = "info") -> None:
    """Serve ``app`` until SIGTERM/SIGINT, then drain and exit normally."""
    drain: Drain = app.state.drain
    guarded_app, protocol = guarded(app, server.header_timeout_s)
    config = uvicorn.Config(
        guarded_app,
        host=server.host,
        port=server.port,
        http=protocol,
        timeout_keep_alive=max(1, round(server.keep_alive_s)),
        log_config=None,
        log_level=log_level,
        access_log=False,
        # uvicorn believes X-Forwarded-For from loopback by default: any local client (or a
        # proxy that passes the header on) could then pick the address the per-address limits
        # count. Only the proxies the operator names are believed.
        proxy_headers=bool(server.trusted_proxies),
        forwarded_allow_ips=list(server.trusted_proxies),
        # After the drain, what is left (an open dashboard tab's SSE) must not hold the exit.
        timeout_graceful_shutdown=5,
    )
    # A worker thread running pure Python (a big prompt's chat template, the scheduler's
    # per-token work) keeps the GIL up to the switch interval each time the event loop asks for
    # it: 5 ms by default, paid several times per request. 1 ms kept /healthz during a heavy
    # prompt at ~40 ms instead of ~75 ms (bench.reliability).
    sys.setswitchinterval(0.001)
    DrainingServer(config, drain, server.drain_s).run()
