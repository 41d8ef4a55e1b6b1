"""`edgeroute serve` as a real process on loopback, as an operator starts it, for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.servers import free_port, wait_ready

REPO = Path(__file__).resolve().parent.parent
# This checkout's code whatever the virtualenv's editable install points at.
EDGEROUTE = [sys.executable, "-c", "from edgeroute.cli import main; main()"]


def run_edgeroute(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """One `edgeroute` command to its end: exit code, stdout and stderr."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*EDGEROUTE, *args], capture_output=True, text=True, cwd=REPO, timeout=timeout, env=full_env
    )


@dataclass
class NodeProcess:
    proc: subprocess.Popen[bytes]
    base: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def node_process(
    *args: str,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 240,
) -> Iterator[NodeProcess]:
    """Start `edgeroute serve --host HOST --port <free> ARGS`; yield once /healthz answers on
    127.0.0.1; stop it with SIGTERM (SIGKILL after 30 s) on the way out."""
    port = free_port()
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [*EDGEROUTE, "serve", "--host", host, "--port", str(port), *args],
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    node = NodeProcess(proc, f"http://127.0.0.1:{port}", log_path)
    try:
        try:
            wait_ready(node.base + "/healthz", lambda: proc.poll() is None, timeout, "the node")
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}; its log:\n{node.log()}") from None
        yield node
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
