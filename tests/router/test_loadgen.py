"""`edgeroute bench load`: its workload, its arithmetic, and one short run against a real node."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from router.loadgen import LoadConfig, Result, check_loopback, run_load, summarize, table, workload


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


@pytest.mark.slow
async def test_a_short_run_against_the_node(node_url: str) -> None:
    cfg = LoadConfig(target=node_url, scenario="streams", clients=2, requests=4, max_tokens=4, cache=False)
    s = await run_load(cfg)
    assert (s["requests"], s["errors"], s["route_shares"]) == (4, {}, {"edge": 1.0})
    assert 4 <= s["completion_tokens"] <= 16
    assert s["per_route"]["edge"]["ttft_ms"]["n"] == 4


@pytest.mark.slow
async def test_refusals_are_counted_by_status(node_url: str) -> None:
    cfg = LoadConfig(target=node_url, scenario="streams", clients=2, requests=4, max_tokens=4, cache=False,
                     model="no-such-model")
    s = await run_load(cfg)
    assert (s["requests"], s["errors"]) == (4, {"http-404": 4})
