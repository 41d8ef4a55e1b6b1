"""`edgeroute cloud serve --tensor-parallel 3`: vLLM serves the twin across 3 ranks (processes), with
its metrics, the same greedy text as the 1-rank member, and a SIGTERM stop that leaves no process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cloud_servers import TEST_DTYPE, agree_until_tie

from cloud.local import LocalMember, free_port
from models import EDGE_DEFAULT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# Few tokens: 3 ranks on 2 cores decode slowly (each token is dozens of all-reduces between
# processes that share the cores), and the point here is the text, not the speed.
PROMPTS = ["The sky is", "Water boils at"]


def _greedy(root: str, prompt: str, key: str | None = None) -> list[tuple[str, dict[str, float]]]:
    """The greedy answer's tokens, each with its two likeliest alternatives."""
    body = {"model": EDGE_DEFAULT, "prompt": prompt, "max_tokens": 8, "temperature": 0, "logprobs": 2}
    headers = {"authorization": f"Bearer {key}"} if key else {}
    answer = httpx.post(f"{root}/v1/completions", json=body, headers=headers, timeout=120)
    assert answer.status_code == 200, answer.text
    logprobs = answer.json()["choices"][0]["logprobs"]
    return list(zip(logprobs["tokens"], logprobs["top_logprobs"], strict=True))


def _live(field: int, value: int) -> list[int]:
    """Live processes whose /proc stat ``field`` (1: parent, 2: process group) is ``value``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[field]) == value and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def test_three_ranks_serve_the_one_rank_greedy_text_and_stop_cleanly(member: LocalMember, logs: Path) -> None:
    port = free_port()
    log = (logs / "tp3.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "cloud.member", "--tensor-parallel", "3", "--port", str(port),
            "--dtype", TEST_DTYPE, "--log-level", "info",
            # One thread a rank: 3 ranks of 2 threads each (the default, every core) spin-waited
            # for each other on 2 cores and decoded 0.3 tokens/s (70 s for the 16 tokens below);
            # one thread each, ~2 tokens/s. The text does not depend on it.
            "--threads", "1",
        ],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            assert proc.poll() is None, (logs / "tp3.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "not ready in 900 s"
            try:
                if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        # The supervisor's child leads vLLM's process group: server, engine core, one worker per rank.
        (server,) = _live(1, proc.pid)
        group = _live(2, server)
        assert len([p for p in group if "VLLM::Worker" in _name(p)]) == 3, (logs / "tp3.log").read_text()[-3000:]
        metrics = httpx.get(f"{root}/metrics", timeout=10).text
        assert "vllm:num_requests_running" in metrics and "vllm:kv_cache_usage_perc" in metrics
        one_rank = member.settings.root_url
        for prompt in PROMPTS:
            three, one = _greedy(root, prompt), _greedy(one_rank, prompt, member.settings.api_key)
            # The same tokens up to a tie of the two likeliest (summed across ranks in another order).
            shared = agree_until_tie(three, one)
            assert agree_until_tie(one, three) == shared
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        deadline = time.monotonic() + 30
        while _live(2, server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _live(2, server) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
