"""`edgeroute bench load`: its workload, its arithmetic, and one short run against a real node."""

from __future__ import annotations

import gc
import itertools
import json
import os
import random
import time
from pathlib import Path

import httpx
import pytest

from loadtest.loadgen import (
    Job, LoadConfig, Result, Tenant, check_loopback, one_request, retry_delay_s, run_load, summarize, table, workload,
)


def test_only_loopback_targets_are_accepted() -> None:
    for url in ("http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:9"):
        check_loopback(url)
    for url in ("http://10.0.0.1:8080", "https://example.com"):
        with pytest.raises(ValueError, match="only loopback"):
            check_loopback(url)


def test_mix_has_every_kind_and_repeats_ask_the_other_side_of_a_pair(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"a": f"How do I learn topic {i}?", "b": f"What is the best way to learn topic {i}?", "duplicate": True}
            for i in range(50)]
    rows.append({"a": "Unrelated one?", "b": "Unrelated two?", "duplicate": False})
    pairs.write_text("\n".join(json.dumps(r) for r in rows))
    cfg = LoadConfig(pairs=pairs, seed=3, max_tokens=32, long_max_tokens=200)
    jobs = list(itertools.islice(workload(cfg), 400))
    kinds = {j.kind for j in jobs}
    assert kinds == {"short", "repeat", "long_prompt", "long_answer"}
    asked = set()
    for job in jobs:
        text = job.messages[0]["content"]
        if job.kind == "short":
            asked.add(text)
            assert job.max_tokens == 32
        elif job.kind == "repeat":
            twin = text.replace("What is the best way to learn", "How do I learn")
            assert twin in asked  # its duplicate was asked before
        elif job.kind == "long_answer":
            assert job.max_tokens == 200
    assert "Unrelated" not in " ".join(j.messages[0]["content"] for j in jobs)
    # Seeded: the same workload every time.
    again = list(itertools.islice(workload(cfg), 400))
    assert again == jobs


def test_summary_percentiles_routes_and_errors() -> None:
    results = [Result("short", "edge", True, (i + 1) / 1000, i / 1000, 10) for i in range(100)]
    results += [Result("short", "cloud", True, 0.5, 0.2, 30), Result("short", "edge", False, 1.0, None, 0, "ReadTimeout")]
    s = summarize(results, 2.0, LoadConfig())
    assert (s["requests"], s["completion_tokens"], s["tokens_per_s"]) == (102, 1030, 515.0)
    assert s["route_shares"] == {"cloud": 1 / 101, "edge": 100 / 101}
    assert s["errors"] == {"ReadTimeout": 1}
    edge = s["per_route"]["edge"]
    assert edge["latency_ms"]["p50"] == pytest.approx(50.5)
    assert edge["latency_ms"]["p99"] == pytest.approx(99.01)
    assert edge["ttft_ms"]["n"] == 100
    assert "edge" in table(s) and "515.0 tok/s" in table(s)


def test_ttft_is_also_reported_by_kind_of_request() -> None:
    results = [Result("short", "edge", True, 1.0, (i + 1) / 1000, 4) for i in range(9)]
    results += [Result("long_prompt", "edge", True, 3.0, 2.5, 4), Result("long_prompt", "edge", False, 1.0, None, 0, "x")]
    s = summarize(results, 1.0, LoadConfig())
    assert s["ttft_by_kind_ms"]["short"] == {"p50": pytest.approx(5.0), "p95": pytest.approx(8.6),
                                             "p99": pytest.approx(8.92), "n": 9}
    assert s["ttft_by_kind_ms"]["long_prompt"] == {"p50": 2500.0, "p95": 2500.0, "p99": 2500.0, "n": 1}
    assert "TTFT by kind p50/p95/p99 ms: long_prompt 2500/2500/2500 (n=1), short 5/9/9 (n=9)" in table(s)


@pytest.mark.slow
async def test_a_short_run_against_the_node(node_url: str) -> None:
    cfg = LoadConfig(target=node_url, scenario="streams", clients=2, requests=4, max_tokens=4, cache=False)
    s = await run_load(cfg)
    assert (s["requests"], s["errors"], s["route_shares"]) == (4, {}, {"edge": 1.0})
    assert 4 <= s["completion_tokens"] <= 16
    assert s["per_route"]["edge"]["ttft_ms"]["n"] == 4
    # The generator's own collector pauses are reported, and its heap is unfrozen again after.
    assert sorted(s["generator_gc"]) == ["collections", "max_ms", "total_ms"]
    assert "generator GC: " in table(s)
    assert gc.get_freeze_count() == 0


@pytest.mark.slow
async def test_refusals_are_counted_by_status(node_url: str) -> None:
    cfg = LoadConfig(target=node_url, scenario="streams", clients=2, requests=4, max_tokens=4, cache=False,
                     model="no-such-model")
    s = await run_load(cfg)
    assert (s["requests"], s["errors"]) == (4, {"http-404": 4})


def test_retry_delay_follows_the_openai_sdk() -> None:
    rng = random.Random(0)
    assert retry_delay_s(httpx.Headers({"retry-after": "3"}), 0, rng) == 3.0
    assert retry_delay_s(httpx.Headers({"retry-after-ms": "250", "retry-after": "3"}), 0, rng) == 0.25
    # Outside (0, 60]: 0.5 s doubling per retry, at most 8 s, less up to a quarter of jitter.
    assert 1.5 <= retry_delay_s(httpx.Headers({"retry-after": "120"}), 2, rng) <= 2.0
    assert 6.0 <= retry_delay_s(httpx.Headers(), 10, rng) <= 8.0


async def test_a_429_is_waited_out_and_retried_like_the_sdk_does() -> None:
    calls: list[float] = []
    stream = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        if len(calls) <= 2:
            return httpx.Response(429, headers={"retry-after-ms": "50"}, json={"error": {}})
        return httpx.Response(200, headers={"content-type": "text/event-stream", "x-edgeroute-route": "edge"},
                              content=stream)

    cfg = LoadConfig(target="http://127.0.0.1:9")
    job = Job("short", ({"role": "user", "content": "hi"},), 4)
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        r = await one_request(client, cfg, job, "a")
    assert (r.ok, r.route, r.refused, r.tenant) == (True, "edge", ["http-429", "http-429"], "a")
    assert calls[1] - calls[0] >= 0.05 and calls[2] - calls[1] >= 0.05
    # With the retries spent the refusal is the result.
    calls.clear()
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        r = await one_request(client, LoadConfig(max_retries=1), job, "a")
    assert (r.ok, r.error, r.refused) == (False, "http-429", ["http-429"])


def test_each_tenant_is_reported_apart_with_its_cache_hit_latency() -> None:
    results = [Result("short", "cache-exact", True, (i + 1) / 1000, 0.0, 1, tenant="a") for i in range(100)]
    results += [Result("short", "edge", True, 2.0, 0.5, 8, tenant="b"),
                Result("short", "edge", False, 0.1, None, 0, "http-429", tenant="a",
                       refused=["http-429", "http-429"])]
    cfg = LoadConfig(tenants=[Tenant("a", "ka", 200), Tenant("b", "kb", 4)])
    s = summarize(results, 10.0, cfg, rss_mb=[700.0, 720.0, 714.0])
    assert s["clients"] == 204
    a, b = s["tenants"]["a"], s["tenants"]["b"]
    assert (a["requests"], a["errors"], a["retries"], a["refusals_retried"]) == (101, {"http-429": 1}, 2, {"http-429": 2})
    assert a["cache_hit_latency_ms"]["p99"] == pytest.approx(99.01)
    assert b["cache_hit_latency_ms"]["n"] == 0 and b["per_route"]["edge"]["requests"] == 1
    assert s["rss_mb"] == {"start": 700.0, "end": 714.0, "max": 720.0, "growth": pytest.approx(0.02)}
    text = table(s)
    assert "tenant a (200 clients, 101 requests)" in text and "node RSS: 700 -> 714 MB (max 720, +2.0%)" in text


@pytest.mark.slow
def test_the_probe_times_cache_hits_of_its_one_question(node_url: str) -> None:
    from loadtest.loadprobe import probe, read_rss_mb

    out = probe(node_url, None, duration_s=1.0, interval_s=0.1, max_tokens=4)
    assert out["other"] == {} and len(out["hits_ms"]) >= 3  # the first answer was made, then hits
    assert read_rss_mb(os.getpid()) is not None and read_rss_mb(2**22 + 1) is None
