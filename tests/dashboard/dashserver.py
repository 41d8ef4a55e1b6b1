"""Serve an ASGI app with uvicorn on a free loopback port, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve(app: Any, *, ready_timeout: float = 180.0) -> Iterator[str]:
    """Yield the base URL (http://127.0.0.1:PORT) while the app is served."""
    # Port 0: the kernel picks a free port, so parallel runs never collide.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + ready_timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server stopped while starting (see the log above)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"the server was not ready within {ready_timeout} s")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
