"""`edgeroute serve` under SIGTERM, and its connection timeouts: a real process on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from loadtest import servers

pytestmark = pytest.mark.slow

@contextmanager
def node_process(tmp_path: Path, config: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    cfg = tmp_path / "node.toml"
    cfg.write_text(config + "\n[cache]\nenabled = false\n")
    with servers.node_process("--config", str(cfg), "--data-dir", str(tmp_path / "d"), "--no-local-member",
                              "--log-level", "info", log_path=tmp_path / "node.log", timeout=120) as node:
        assert node.proc is not None
        yield node.proc, node.base


def stream(base: str, max_tokens: int, out: list[list[str]], started: threading.Event) -> None:
    body = {"model": "edge", "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]}
    lines: list[str] = []
    out.append(lines)
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=120) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
                started.set()


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sigterm_drains_streams_refuses_new_requests_and_exits_0(tmp_path: Path) -> None:
    with node_process(tmp_path, "[server]\ndrain_s = 60\nheader_timeout_s = 1") as (proc, base):
        # A client that never finishes its headers is let go.
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as slow:
            slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
            assert slow.recv(1024) == b""  # closed by the node after ~1 s
        streams: list[list[str]] = []
        started = threading.Event()
        workers = [threading.Thread(target=stream, args=(base, 24, streams, started)) for _ in range(8)]
        for worker in workers:
            worker.start()
        assert started.wait(60)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        refused = httpx.post(base + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=10)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "5"
        assert refused.json()["error"]["code"] == "draining"
        for worker in workers:
            worker.join(120)
        assert len(streams) == 8
        for lines in streams:
            assert lines[-1] == "[DONE]" and lines.count("[DONE]") == 1
            assert not any("error" in json.loads(x) for x in lines[:-1])
        assert proc.wait(60) == 0
        assert group_gone(proc.pid)
        log = (tmp_path / "node.log").read_text()
        assert "SIGTERM: draining" in log


def test_streams_past_the_drain_deadline_end_with_an_error_event_and_done(tmp_path: Path) -> None:
    with node_process(tmp_path, "[server]\ndrain_s = 1") as (proc, base):
        streams: list[list[str]] = []
        started = threading.Event()
        worker = threading.Thread(target=stream, args=(base, 1500, streams, started))
        worker.start()
        assert started.wait(60)
        proc.send_signal(signal.SIGTERM)
        worker.join(60)
        lines = streams[0]
        assert lines[-1] == "[DONE]" and lines.count("[DONE]") == 1
        assert json.loads(lines[-2])["error"]["code"] == "shutting_down"
        assert proc.wait(60) == 0
        assert group_gone(proc.pid)
