"""A node killed with SIGKILL (a crash, the OOM killer) and started again, as a supervisor does:
every answer the client got was already in the cache file, and is served from it after."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from loadtest.servers import node_process

pytestmark = pytest.mark.slow

ASKS = [
    {"model": "edge", "max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": f"Name a colour, {i}."}]}
    for i in range(3)
]


def test_an_acknowledged_answer_survives_sigkill_and_is_served_from_the_cache(tmp_path: Path) -> None:
    args = ("--no-local-member", "--data-dir", str(tmp_path / "d"))
    answers = []
    with node_process(*args, log_path=tmp_path / "first.log") as node:
        for body in ASKS:
            resp = httpx.post(node.base + "/v1/chat/completions", json=body, timeout=120)
            assert resp.status_code == 200 and resp.headers["x-edgeroute-route"] == "edge", resp.text
            answers.append(resp.json()["choices"][0]["message"]["content"])
        # Killed the moment the last answer arrived: no shutdown, no flush, no checkpoint.
        os.killpg(node.proc.pid, signal.SIGKILL)
        assert node.proc.wait(30) == -signal.SIGKILL
    with node_process(*args, log_path=tmp_path / "second.log") as node:
        for body, answer in zip(ASKS, answers, strict=True):
            resp = httpx.post(node.base + "/v1/chat/completions", json=body, timeout=120)
            assert resp.status_code == 200
            assert (resp.headers["x-edgeroute-route"], resp.headers["x-edgeroute-reason"]) == ("cache-exact", "exact-hit")
            assert resp.json()["choices"][0]["message"]["content"] == answer
