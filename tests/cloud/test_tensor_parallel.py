"""A 3-rank tensor-parallel member really shards (each rank holds a third of q_proj), answers like
the 1-rank member, and a dead rank takes it down."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from cloud_servers import torch_member

from cloud.local import LocalMember

pytestmark = pytest.mark.slow

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "Answer in one short sentence."},
        {"role": "user", "content": "Why is the sky blue?"},
    ],
]


def _greedy(port: int, model: str, messages: list[dict[str, str]]) -> str:
    body = {"model": model, "messages": messages, "temperature": 0, "max_tokens": 10}
    resp = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=300)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


# SmolLM2-135M: hidden 576, 9 heads of 64 -> q_proj is 576 x 576.
Q_PROJ = "model.layers.0.self_attn.q_proj.weight"
Q_PROJ_NUMEL = 576 * 576


def _sharding(port: int) -> dict[str, object]:
    resp = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "ok"
    return dict(body["tensor_parallel"])


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] == "Z"


def test_three_ranks_match_one_rank_then_a_dead_rank_stops_the_member(
    member: LocalMember, logs: Path
) -> None:
    assert _sharding(member.port) == {
        "world_size": 1,
        "param": Q_PROJ,
        "full_numel": Q_PROJ_NUMEL,
        "local_numel": [Q_PROJ_NUMEL],
    }
    expected = [_greedy(member.port, member.model, p) for p in PROMPTS]
    with torch_member(logs, tensor_parallel=3, name="tp3") as tp3:
        assert tp3.pid is not None
        ranks = _children(tp3.pid)
        assert len(ranks) == 2  # ranks 1 and 2; rank 0 is the server itself
        # Equal greedy text alone would not tell sharding from 3 full copies: each rank reports
        # how much of q_proj it holds, and each must hold exactly a third.
        assert _sharding(tp3.port) == {
            "world_size": 3,
            "param": Q_PROJ,
            "full_numel": Q_PROJ_NUMEL,
            "local_numel": [Q_PROJ_NUMEL // 3] * 3,
        }
        assert [_greedy(tp3.port, tp3.model, p) for p in PROMPTS] == expected

        os.kill(ranks[1], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while not (_gone(tp3.pid) and _gone(ranks[0])) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(tp3.pid) and _gone(ranks[0]), "a dead rank must take the whole member down"
        assert tp3.proc is not None and tp3.proc.wait(5) == 1
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{tp3.port}/health", timeout=5)
