"""Real servers on loopback for tests: a uvicorn thread running the node's app."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, alive: Callable[[], bool], timeout: float, what: str = "the server") -> None:
    """Return once ``url`` answers 200; raise when ``alive()`` turns False or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise RuntimeError(f"{what} stopped during start-up")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout}s")
        time.sleep(0.1)


def settled(app: Any, within_s: float = 10.0) -> Any:
    """``app`` once no API request is in flight on it: a stream's decision is recorded as its
    response closes, a loop turn after the client has its last byte, and a test reading the
    node's memory from its own thread has no round trip to wait for that turn."""
    deadline = time.monotonic() + within_s
    while app.state.drain.in_flight > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return app


@contextmanager
def serve_app(app: Any, ready_path: str = "/healthz", timeout: float = 120.0) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread; yield its base URL once ``ready_path`` answers 200."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + ready_path, thread.is_alive, timeout, "the server thread")
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=60)
