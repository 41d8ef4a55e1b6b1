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
from types import FrameType
from typing import Any

import uvicorn
from litestar import Litestar
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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


def _protocol(header_timeout_s: float, max_head_bytes: int = MAX_HEAD_BYTES) -> type[HttpToolsProtocol]:
    class GuardedProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol (llhttp, in C) with a deadline and a size cap for the head
        of each request on a connection.

        h11, which uvicorn also offers, caps a head at 16 KiB but parses in Python: it cost the
        node ~0.3-0.5 ms of CPU per request more on this project's 2-core machine.
        """

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(_OneWritePerTurn(transport, self.loop))  # type: ignore[arg-type]
            self._head_timer: asyncio.TimerHandle | None = None
            self._heads = 0  # heads read whole on this connection
            self._head_bytes = 0
            self._arm()

        def _arm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(header_timeout_s, self._headers_late, self._heads)

        def _headers_late(self, heads: int) -> None:
            self._head_timer = None
            idle = self.cycle is None or self.cycle.response_complete
            if heads == self._heads and idle and not self.transport.is_closing():
                self.transport.close()

        def on_message_begin(self) -> None:
            self._head_bytes = 0
            super().on_message_begin()

        def _count(self, size: int) -> None:
            self._head_bytes += size
            if self._head_bytes > max_head_bytes:
                # Raised inside the parser: uvicorn answers 400 and closes, as h11 does past its cap.
                raise ValueError(f"request head over {max_head_bytes} bytes")

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._heads += 1
            if self._head_timer is not None:
                self._head_timer.cancel()  # the head came: the body has its own deadline
                self._head_timer = None
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

    return GuardedProtocol


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
    config = uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        http=_protocol(server.header_timeout_s),
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
