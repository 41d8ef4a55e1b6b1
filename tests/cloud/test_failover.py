"""A member killed with SIGKILL: ejected within 3 failed requests, readmitted once it is back, and a
stream it was sending breaks with the partial text."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cloud_servers import llama_server, llama_settings, running

from cloud import CloudPool, PoolEvent, PoolSettings, StreamBrokenError
from cloud.local import LocalMember
from models import GenerationRequest, SamplingParams, collect

pytestmark = pytest.mark.slow

QUESTION = ({"role": "user", "content": "What is the capital of France?"},)
SHORT = GenerationRequest(SamplingParams(max_tokens=2, temperature=0.0), messages=QUESTION)


async def test_sigkill_ejects_within_three_failures_and_restart_readmits(
    member: LocalMember, logs: Path
) -> None:
    events: list[PoolEvent] = []
    ps = PoolSettings(
        health_interval_s=0.5,
        health_timeout_s=5,
        cooldown_s=1.0,
        failure_threshold=3,
        first_token_timeout_s=120,
        retries=2,
        backoff_initial_s=0.01,
    )
    with running(llama_server(logs, "victim")) as victim:
        async with CloudPool(
            ps, members=[member.settings, llama_settings(victim, "victim")], on_event=events.append
        ) as pool:
            await asyncio.gather(*(collect(pool.stream(SHORT)) for _ in range(2)))
            assert {e.member for e in events if e.kind == "success"} == {"torch", "victim"}

            victim.kill()  # SIGKILL, the whole process group
            killed_at = len(events)
            answers = []
            for _ in range(10):
                answers.append(await collect(pool.stream(SHORT)))
                if pool.status()[1].circuit == "open":
                    break
            after = events[killed_at:]
            assert pool.status()[1].circuit == "open"
            assert ("ejected", "victim") in [(e.kind, e.member) for e in after]
            failed_requests = [e for e in after if e.kind == "failure" and e.member == "victim"]
            assert len(failed_requests) <= 3
            assert all(a.text for a in answers)  # every request was answered (retried on the live member)
            assert all(e.member == "torch" for e in after if e.kind == "success")

            victim.spawn()  # same port
            victim.wait_ready()
            restarted_at = len(events)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                await collect(pool.stream(SHORT))
                if any(e.kind == "readmitted" and e.member == "victim" for e in events[restarted_at:]):
                    break
                await asyncio.sleep(0.2)
            back = [(e.kind, e.member) for e in events[restarted_at:] if e.member == "victim"]
            assert ("half_open", "victim") in back and ("readmitted", "victim") in back
            assert ("success", "victim") in back  # the probe request was served by the restarted member
            assert pool.status()[1].circuit == "closed" and pool.status()[1].healthy


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
