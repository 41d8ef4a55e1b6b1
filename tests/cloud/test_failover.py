"""A member killed with SIGKILL beside a live vLLM member: ejected by exactly its 3rd failed request,
readmitted once it is back, and a stream it was sending breaks with the partial text. (A vLLM
member killed mid-stream under a node: test_vllm_node.py.)"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cloud_servers import llama_server, llama_settings, running

from cloud import CloudPool, MemberSettings, PoolEvent, PoolSettings, StreamBrokenError
from cloud.local import LocalMember, ServerProcess
from models import GenerationRequest, SamplingParams, collect

pytestmark = pytest.mark.slow

QUESTION = ({"role": "user", "content": "What is the capital of France?"},)
SHORT = GenerationRequest(SamplingParams(max_tokens=2, temperature=0.0), messages=QUESTION)


@contextmanager
def _victim(logs: Path) -> Iterator[tuple[ServerProcess, MemberSettings]]:
    """A second member to kill: llama.cpp's server (it restarts in seconds, vLLM in minutes)."""
    with running(llama_server(logs, "victim")) as proc:
        yield proc, llama_settings(proc, "victim")


def _victim_log(events: list[PoolEvent], since: int) -> list[str]:
    return [e.kind for e in events[since:] if e.member == "victim" and e.kind != "retry"]


async def test_sigkill_ejects_within_three_failures_and_restart_readmits(member: LocalMember, logs: Path) -> None:
    events: list[PoolEvent] = []
    ps = PoolSettings(
        # No health loop: only the opening round (both alive) runs, so ejection comes from requests.
        health_interval_s=0,
        health_timeout_s=5,
        cooldown_s=5.0,  # longer than one round of requests, so the ejected member is not probed early
        failure_threshold=3,
        first_token_timeout_s=120,
        retries=2,
        backoff_initial_s=0.01,
    )
    with _victim(logs) as (victim, victim_settings):
        async with CloudPool(ps, members=[member.settings, victim_settings], on_event=events.append) as pool:
            # Two at a time: the least-loaded choice sends one of each pair to each member.
            await asyncio.gather(*(collect(pool.stream(SHORT)) for _ in range(2)))
            assert Counter(e.member for e in events if e.kind == "success") == {"vllm": 1, "victim": 1}

            victim.kill()  # SIGKILL, the whole process group
            killed_at = len(events)
            for failed in (1, 2, 3):
                # The member is idle and healthy-looking: one of the pair goes to it, is refused, and
                # is retried on the live member; exactly one failed request per round.
                answers = await asyncio.gather(*(collect(pool.stream(SHORT)) for _ in range(2)))
                assert all(a.text for a in answers)  # every request was answered anyway
                row = pool.status()[1]
                assert row.failures == failed
                assert row.circuit == ("open" if failed == 3 else "closed")
            assert _victim_log(events, killed_at) == ["failure", "failure", "failure", "ejected"]
            assert all(e.member == "vllm" for e in events[killed_at:] if e.kind == "success")

            ejected_at = len(events)
            await asyncio.gather(*(collect(pool.stream(SHORT)) for _ in range(2)))
            assert _victim_log(events, ejected_at) == []  # ejected: not even tried

            victim.spawn()  # same port
            victim.wait_ready()
            restarted_at = len(events)
            deadline = time.monotonic() + ps.cooldown_s + 10
            while not pool.members[1].breaker.cooled() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert pool.status()[1].circuit == "open"  # cooled, but nothing has looked at it yet
            await pool.check_health()  # a passing health check lets one request probe it
            assert pool.status()[1].circuit == "half-open"
            assert (await collect(pool.stream(SHORT))).text
            assert _victim_log(events, restarted_at) == ["half_open", "started", "success", "readmitted"]
            row = pool.status()[1]
            assert (row.circuit, row.healthy, row.failures) == ("closed", True, 0)


async def test_sigkill_mid_stream_breaks_with_the_partial_text(logs: Path) -> None:
    events: list[PoolEvent] = []
    request = GenerationRequest(
        SamplingParams(max_tokens=400, temperature=0.0),
        messages=({"role": "user", "content": "Write a long story about a dragon."},),
    )
    with running(llama_server(logs, "midstream")) as victim:
        async with CloudPool(
            PoolSettings(health_interval_s=0),
            members=[llama_settings(victim, "midstream")],
            on_event=events.append,
        ) as pool:
            got: list[str] = []
            with pytest.raises(StreamBrokenError) as info:
                async for chunk in pool.stream(request):
                    got.append(chunk.text)
                    if len(got) == 3:
                        victim.kill()
            assert len(got) >= 3
            assert info.value.partial == "".join(got)
            assert info.value.member == "midstream"
            assert [e.kind for e in events] == ["started", "stream_broken"]
