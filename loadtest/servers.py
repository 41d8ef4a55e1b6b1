"""Servers on loopback for the benchmarks, the load tools and the tests: ``edgeroute serve`` (or any
server command) as a process of its own, or an app on a uvicorn thread of this one.

A process is a :class:`cloud.member.process.ServerProcess`: it leads its own process group, is
yielded once its URL answers 200, and is stopped on the way out (SIGTERM, then SIGKILL for the
whole group).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from cloud.member.process import ServerProcess, free_port, project_root, wait_ready

__all__ = ["EDGEROUTE", "REPO", "NodeProcess", "edgeroute_node", "free_port", "node_process", "run_edgeroute",
           "serve_app", "settled", "wait_ready"]

REPO = project_root()
# This checkout's code whatever the virtualenv's editable install points at.
EDGEROUTE = [sys.executable, "-c", "from edgeroute.cli import main; main()"]


def run_edgeroute(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EDGEROUTE, *args], capture_output=True, text=True, cwd=REPO, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


class NodeProcess(ServerProcess):
    """A server process ``argv`` and its base URL (``http://127.0.0.1:PORT``), ready once ``base +
    ready_path`` answers 200; ``env`` is added to this process's, its output goes to ``log_path``
    (else this process's)."""

    def __init__(
        self,
        argv: Sequence[str],
        base: str,
        *,
        ready_path: str = "/healthz",
        log_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 240,
        what: str = "the server",
    ) -> None:
        super().__init__(argv, base + ready_path, log_path=log_path, env={**os.environ, **(env or {})},
                         startup_timeout_s=timeout, label=what)
        self.base = base

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path is not None else ""

    @contextmanager
    def running(self) -> Iterator[NodeProcess]:
        """Started, yielded once ready, stopped on the way out."""
        self.spawn()
        try:
            self.wait_ready()
            yield self
        finally:
            self.stop(30)


def edgeroute_node(
    *args: str,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    command: Sequence[str] = EDGEROUTE,
    timeout: float = 240,
) -> NodeProcess:
    """``edgeroute serve --host HOST --port PORT ARGS`` (a free port unless given; ``command`` is
    the ``edgeroute`` to run, e.g. behind ``taskset``), not started; ready once ``/healthz`` answers
    on 127.0.0.1."""
    port = port or free_port()
    argv = [*command, "serve", "--host", host, "--port", str(port), *args]
    return NodeProcess(argv, f"http://127.0.0.1:{port}", log_path=log_path, env=env, timeout=timeout, what="the node")


def node_process(*args: str, **options: Any) -> AbstractContextManager[NodeProcess]:
    """:func:`edgeroute_node` (its arguments), running: yielded once ready, stopped on the way out."""
    return edgeroute_node(*args, **options).running()


@contextmanager
def serve_app(app: Any, ready_path: str | None = "/healthz", timeout: float = 120.0) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread; yield its base URL once ``ready_path`` answers 200 (None:
    once uvicorn has started it). Connections still open 5 s into the stop are closed."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        if ready_path is None:
            wait_ready(base, thread.is_alive, timeout, "the server thread", lambda _: server.started)
        else:
            wait_ready(base + ready_path, thread.is_alive, timeout, "the server thread")
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def settled(app: Any, within_s: float = 10.0) -> Any:
    """``app`` once no API request is in flight on it: a stream's decision is recorded as its
    response closes, a loop turn after the client has its last byte, and a test reading the
    node's memory from its own thread has no round trip to wait for that turn."""
    deadline = time.monotonic() + within_s
    while app.state.drain.in_flight > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return app
