"""The pool against real members on loopback: vLLM (the node.s local member) and llama.cpp.s server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import replace

import httpx
import pytest
from cloud_servers import HangingServer, ScriptedServer, llama_settings

from cloud import (
    CloudPool,
    CloudRequestError,
    Member,
    MemberSettings,
    MemberTimeoutError,
    PoolEvent,
    PoolSettings,
    PoolUnavailableError,
)
from cloud.health import Scrape
from cloud.local import LocalMember, ServerProcess
from cloud.local import free_port
from models import Chunk, Engine, GenerationRequest, SamplingParams, collect

QUESTION = ({"role": "user", "content": "What is the capital of France?"},)


def greedy(max_tokens: int = 8, **kw: object) -> GenerationRequest:
    return GenerationRequest(SamplingParams(max_tokens=max_tokens, temperature=0.0), messages=QUESTION, **kw)  # type: ignore[arg-type]


def settings(**kw: object) -> PoolSettings:
    base: dict[str, object] = {"health_interval_s": 0, "first_token_timeout_s": 120, "stall_timeout_s": 60}
    return PoolSettings(**{**base, **kw})  # type: ignore[arg-type]


async def direct_deltas(member: MemberSettings, request: GenerationRequest) -> list[str]:
    """The content deltas the member sends, read straight off its SSE stream."""
    from models.openai.client import request_body

    path, body = request_body(request, member.model)
    out: list[str] = []
    headers = {"authorization": f"Bearer {member.api_key}"} if member.api_key else {}
    async with (
        httpx.AsyncClient(base_url=member.base_url, headers=headers, timeout=120) as client,
        client.stream("POST", path, json=body) as resp,
    ):
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["delta"].get("content"):
                    out.append(event["choices"][0]["delta"]["content"])
    return out


@pytest.mark.parametrize("which", ["member", "llama"])
async def test_streaming_chunks_pass_through_unchanged(which: str, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(which)
    ms = server.settings if which == "member" else llama_settings(server)
    # Cut by max_tokens: every token is a delta (an end-of-sequence token counts but has no text).
    expected = await direct_deltas(ms, greedy(5))
    async with CloudPool(settings(), members=[ms]) as pool:
        chunks: list[Chunk] = [c async for c in pool.stream(greedy(5))]
    assert [c.text for c in chunks[:-1]] == expected
    assert len(expected) == 5
    assert chunks[-1].text == "" and chunks[-1].finish_reason == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(expected)


async def test_continuation_through_the_pool(member: LocalMember) -> None:
    # A question the model answers with confidence: in bfloat16 a near-tie between two tokens
    # may go either way once the prefix is read as prompt instead of generated.
    colors = ({"role": "user", "content": "Name three colors."},)
    ask = GenerationRequest(SamplingParams(max_tokens=12, temperature=0.0), messages=colors)
    async with CloudPool(settings(), members=[member.settings]) as pool:
        full = (await collect(pool.stream(ask))).text
        prefix = full[: full.index("\n") + 1]
        assert 0 < len(prefix) < len(full)
        rest = await collect(pool.stream(replace(ask, assistant_prefix=prefix)))
    assert prefix + rest.text == full


async def test_requests_spread_across_members(member: LocalMember, llama: ServerProcess) -> None:
    events: list[PoolEvent] = []
    async with CloudPool(
        settings(), members=[member.settings, llama_settings(llama)], on_event=events.append
    ) as pool:
        answers = await asyncio.gather(*(collect(pool.stream(greedy(4))) for _ in range(6)))
        assert all(a.text for a in answers)
        served = Counter(e.member for e in events if e.kind == "success")
        assert served == {"vllm": 3, "llama": 3}
        assert [s.outstanding for s in pool.status()] == [0, 0]


@pytest.mark.parametrize(("vllm_weight", "llama_weight", "expected"), [(2, 1, (4, 2)), (1, 2, (2, 4))])
async def test_weight_steers_concurrent_load(
    member: LocalMember,
    llama: ServerProcess,
    vllm_weight: float,
    llama_weight: float,
    expected: tuple[int, int],
) -> None:
    """Load is in-flight requests / weight: of 6 concurrent requests the weight-2 member takes 4.

    Deterministic: all six are placed before any answers. With weights 2:1 the scores go
    0|0 (tie, first) -> .5|0 -> .5|1 -> 1|1 (tie, rotates to the second) -> 1|2 -> 1.5|2.
    """
    events: list[PoolEvent] = []
    members = [
        member.settings.model_copy(update={"weight": vllm_weight}),
        llama_settings(llama).model_copy(update={"weight": llama_weight}),
    ]
    async with CloudPool(settings(), members=members, on_event=events.append) as pool:
        answers = await asyncio.gather(*(collect(pool.stream(greedy(2))) for _ in range(6)))
        assert all(a.text for a in answers)
    served = Counter(e.member for e in events if e.kind == "success")
    assert (served["vllm"], served["llama"]) == expected
    assert not [e for e in events if e.kind in ("failure", "retry")]


async def test_a_429_before_the_first_token_is_retried_on_another_member(member: LocalMember) -> None:
    limited = ScriptedServer(
        [("send", b'{"error": {"message": "rate limited", "type": "rate_limit_error"}}')],
        status="429 Too Many Requests",
        content_type="application/json",
    )
    events: list[PoolEvent] = []
    # Not started (no health round): the scripted server would answer /health with 429 as well.
    pool = CloudPool(
        settings(retries=1, backoff_initial_s=0.01),
        members=[limited.settings("limited"), member.settings],  # a tie goes to the first: limited
        on_event=events.append,
    )
    try:
        answer = await collect(pool.stream(greedy(4)))
        assert answer.text and answer.finish_reason in ("stop", "length")
        assert [(e.kind, e.member) for e in events] == [
            ("failure", "limited"),
            ("retry", "limited"),
            ("started", "vllm"),
            ("success", "vllm"),
        ]
        assert events[0].error == "member limited answered 429: rate limited"
        assert limited.connections == 1
        assert [(s.name, s.failures) for s in pool.status()] == [("limited", 1), ("vllm", 0)]
    finally:
        await pool.aclose()
        limited.close()


async def test_metrics_steer_requests_away_from_a_busy_member(
    member: LocalMember, llama: ServerProcess
) -> None:
    """Another client's request shows in the member's vLLM gauges: the pool sends ours elsewhere."""
    events: list[PoolEvent] = []
    # Health rounds every minute: the scrape taken below stays fresh (3 intervals) for the whole test.
    ps = settings(health_interval_s=60)
    async with CloudPool(
        ps, members=[member.settings, llama_settings(llama)], on_event=events.append
    ) as pool:
        other = Member(member.settings, settings())  # a different client of the same member
        counting = GenerationRequest(SamplingParams(max_tokens=300, temperature=0.0), prompt="1, 2, 3, 4,")
        busy = other.stream(counting)  # keeps decoding for the whole test
        await anext(busy)  # decoding now
        await pool.check_health()
        local = pool.status()[0]
        assert (local.running, local.outstanding) == (1, 0)
        assert local.kv_cache_usage is not None and local.kv_cache_usage > 0  # the busy request's blocks
        for _ in range(3):
            await collect(pool.stream(greedy(2)))
        await busy.aclose()
        await other.aclose()
    assert [e.member for e in events if e.kind == "success"] == ["llama", "llama", "llama"]


async def test_a_member_that_never_answers_is_timed_out(member: LocalMember) -> None:
    hang = HangingServer()
    try:
        ps = settings(first_token_timeout_s=1.0)
        generous = settings(first_token_timeout_s=5.0)  # the live member must answer in time even under load
        lone = Member(hang.settings("hang"), ps)
        started = time.monotonic()
        with pytest.raises(MemberTimeoutError, match="silent for 1s before the first token"):
            await anext(lone.stream(greedy()))
        assert 1.0 <= time.monotonic() - started < 3.0  # the 1 s deadline, not some later one
        await lone.aclose()

        events: list[PoolEvent] = []
        members = [hang.settings("hang"), member.settings]  # ties go to the first member: the hanging one
        # No health round yet: only requests can tell.
        pool = CloudPool(generous, members=members, on_event=events.append)
        try:
            answers = [await collect(pool.stream(greedy(4))) for _ in range(2)]
            assert all(a.text for a in answers)
            failures = [e for e in events if e.kind == "failure"]
            assert [e.member for e in failures] == ["hang"]
            assert "before the first token" in (failures[0].error or "")
            assert [e.kind for e in events if e.kind in ("retry", "success")] == [
                "retry",
                "success",
                "success",
            ]
            # The active health check sees it too: accepting connections is not being alive.
            await pool.check_health()
            hang_row = pool.status()[0]
            assert not hang_row.healthy and "timed out" in (hang_row.last_error or "")
        finally:
            await pool.aclose()
        assert hang.connections >= 1
    finally:
        hang.close()


async def test_hedging_races_a_slow_first_token(member: LocalMember) -> None:
    hang = HangingServer()
    try:
        events: list[PoolEvent] = []
        ps = settings(hedging=True, hedge_after_s=0.3, first_token_timeout_s=300)
        pool = CloudPool(ps, members=[hang.settings("hang"), member.settings], on_event=events.append)
        async with contextlib.aclosing(pool):
            started = time.monotonic()
            answer = await collect(pool.stream(greedy(4)))
            elapsed = time.monotonic() - started
            assert answer.text
            assert pool.status()[0].outstanding == 0  # the slow attempt was cancelled
        assert elapsed < 300
        kinds = [(e.kind, e.member) for e in events if e.kind in ("hedge", "success", "failure")]
        assert kinds == [("hedge", "vllm"), ("success", "vllm")]
    finally:
        hang.close()


async def test_all_members_down_is_one_clear_error_quickly() -> None:
    down = [
        MemberSettings(name=f"down{i}", base_url=f"http://127.0.0.1:{free_port()}/v1", model="m")
        for i in range(2)
    ]
    events: list[PoolEvent] = []
    async with CloudPool(settings(retries=2), members=down, on_event=events.append) as pool:
        started = time.monotonic()
        with pytest.raises(PoolUnavailableError, match="no cloud member could serve the request") as info:
            await anext(pool.stream(greedy()))
        assert time.monotonic() - started < 5  # connect errors fail fast; nothing waits for a timeout
        assert info.value.code == "cloud_unavailable"
        kinds = [e.kind for e in events if e.kind != "ejected"]
        assert kinds == ["failure", "retry", "failure", "retry", "failure", "unavailable"]
        for _ in range(3):  # the first health round and these attempts reach the failure threshold (3)
            if [s.circuit for s in pool.status()] == ["open", "open"]:
                break
            with pytest.raises(PoolUnavailableError):
                await anext(pool.stream(greedy()))
        assert [s.circuit for s in pool.status()] == ["open", "open"]
        assert sorted(e.member for e in events if e.kind == "ejected") == ["down0", "down1"]
        with pytest.raises(PoolUnavailableError, match="no cloud member is available"):
            await anext(pool.stream(greedy()))
        assert sum(m.healthy for m in pool.status()) == 0


async def test_the_requests_own_fault_is_not_retried_nor_held_against_the_member(member: LocalMember) -> None:
    events: list[PoolEvent] = []
    async with CloudPool(settings(), members=[member.settings], on_event=events.append) as pool:
        with pytest.raises(CloudRequestError) as info:
            await anext(pool.stream(greedy(5000)))
        assert info.value.param == "max_tokens" and "max_model_len=2048" in info.value.message
        assert [e.kind for e in events] == ["rejected"]
        assert pool.status()[0].failures == 0 and pool.status()[0].circuit == "closed"


async def test_health_checks_scrape_and_status(member: LocalMember, llama: ServerProcess) -> None:
    async with CloudPool(settings(), members=[member.settings, llama_settings(llama)]) as pool:
        assert isinstance(pool, Engine) and all(isinstance(m, Engine) for m in pool.members)
        await collect(pool.stream(greedy(3)))
        # A scrape older than its freshness window is not read: on a busy box the answer alone may take longer.
        await pool.check_health()
        rows = {s.name: s for s in pool.status()}
        assert rows["vllm"].healthy and rows["llama"].healthy
        assert rows["vllm"].kv_cache_usage == 0.0 and rows["llama"].kv_cache_usage is None  # idle; no vLLM gauges
        assert sum(m.healthy for m in pool.status()) == 2 and sum(m.depth() for m in pool.members) == 0
        assert pool.ttft_ms_p50() is not None
        served = [r for r in rows.values() if r.latency_ms_p50 is not None]
        assert len(served) == 1 and served[0].ttft_ms_p50 is not None
        bad = member.settings.model_copy(update={"name": "wrong-model", "model": "not-served"})
    async with CloudPool(settings(), members=[bad]) as pool:
        (row,) = pool.status()
        assert not row.healthy and "not served" in (row.last_error or "")


async def test_the_emptier_kv_cache_breaks_a_tie_in_depth() -> None:
    """Two idle-looking members (no requests running or waiting): the one whose vLLM reports less
    of its KV cache in use is chosen, whichever is listed first; equal usage rotates."""
    members = [MemberSettings(name=n, base_url=f"http://127.0.0.1:{free_port()}/v1", model="m") for n in ("a", "b")]
    pool = CloudPool(settings(), members=members)
    try:
        a, b = pool.members
        now = time.monotonic()
        a.scrape, b.scrape = Scrape(0, 0, 0, now, 0.6), Scrape(0, 0, 0, now, 0.1)
        picks = []
        for _ in range(3):
            chosen = pool._choose([])
            assert chosen is not None
            picks.append(chosen.name)
            chosen.breaker.release()
        assert picks == ["b", "b", "b"]
        a.scrape = Scrape(0, 0, 0, now, 0.1)
        picks = []
        for _ in range(2):
            chosen = pool._choose([])
            assert chosen is not None
            picks.append(chosen.name)
            chosen.breaker.release()
        assert sorted(picks) == ["a", "b"]
    finally:
        await pool.aclose()
