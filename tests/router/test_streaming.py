"""router.streaming: a stream's last piece ends the body at once, the stream's clean-up runs after
the client has it, and a client that goes away stops the stream. A real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import httpx
from litestar import Litestar, get

from router.streaming import EventStream, Last
from loadtest.servers import serve_app


def _app(pieces: Callable[[], AsyncIterator[bytes]]) -> Litestar:
    @get("/healthz", sync_to_thread=False)
    def healthz() -> str:
        return "ok"

    @get("/stream")
    async def stream() -> EventStream:
        return EventStream(pieces(), media_type="text/plain")

    return Litestar([healthz, stream])


def test_the_last_piece_ends_the_body_before_the_streams_clean_up_runs() -> None:
    release, cleaned = threading.Event(), threading.Event()

    async def pieces() -> AsyncIterator[bytes]:
        try:
            yield b"one "
            yield Last(b"two")
        finally:
            # The clean-up waits for the client to have read the whole body: sent only after
            # the iterator ended, the body would never end and the client would time out.
            while not release.is_set():
                await asyncio.sleep(0.01)
            cleaned.set()

    with serve_app(_app(pieces)) as base:
        response = httpx.get(base + "/stream", timeout=10)
        assert (response.status_code, response.text) == (200, "one two")
        assert not cleaned.is_set()
        release.set()
        assert cleaned.wait(10)


def test_an_iterator_that_ends_without_a_last_piece_ends_the_body_then() -> None:
    async def pieces() -> AsyncIterator[bytes]:
        yield b"a"
        yield b"b"

    with serve_app(_app(pieces)) as base:
        response = httpx.get(base + "/stream", timeout=10)
    assert (response.status_code, response.text) == (200, "ab")


def test_a_client_that_goes_away_stops_the_stream() -> None:
    cancelled, closed = threading.Event(), threading.Event()

    async def pieces() -> AsyncIterator[bytes]:
        try:
            yield b"start"
            await asyncio.sleep(3600)
            yield Last(b"never")
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finally:
            closed.set()

    with serve_app(_app(pieces)) as base:
        with httpx.Client(timeout=10) as client, client.stream("GET", base + "/stream") as response:
            assert next(response.iter_bytes()) == b"start"
        assert cancelled.wait(10)
        assert closed.is_set()
        # The server goes on answering.
        assert httpx.get(base + "/healthz", timeout=10).text == "ok"
