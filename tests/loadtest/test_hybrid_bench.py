"""`python -m bench.hybrid`: its pure parts (goodput, the workloads' shares, the CPU line, the report)."""

from __future__ import annotations

import itertools
import platform

from bench.harness import describe_cpu
from bench.hybrid import config_report, good_requests, side_of, workload_shares
from loadtest.loadgen import LoadConfig, Result, workload


def _results() -> list[Result]:
    return [
        Result("short", "edge", True, 0.8, 0.25, 10),
        Result("short", "edge", True, 2.0, 1.0, 12),  # exactly at the objective: good
        Result("short", "cache-exact", True, 0.01, 0.005, 8),
        Result("long_answer", "cloud", True, 9.0, 1.5, 256),  # answered, first token too late
        Result("long_prompt", "cloud", False, 3.0, 0.5, 4, "stream-cut"),  # never finished: not good
        Result("short", "edge", False, 30.0, None, 0, "ReadTimeout"),
    ]


def test_goodput_counts_finished_requests_whose_first_token_met_the_objective() -> None:
    results = _results()
    assert good_requests(results, 1.0) == 3
    assert good_requests(results, 2.0) == 4
    assert good_requests(results, 0.1) == 1
    assert good_requests([], 1.0) == 0


def test_report_figures_by_side_and_cloud_tokens() -> None:
    report = config_report(_results(), 2.0, 1.0, LoadConfig())
    assert (report["goodput"], report["good"], report["requests"], report["ok"]) == (1.5, 3, 6, 4)
    assert report["errors"] == {"stream-cut": 1, "ReadTimeout": 1}
    assert report["completion_tokens"] == 286
    assert report["tokens_per_s"] == 143.0
    assert report["cloud_tokens"] == 260  # the cut cloud stream's tokens were spent too
    assert report["route_shares"] == {"cache-exact": 0.25, "cloud": 0.25, "edge": 0.5}
    sides = report["by_side"]
    assert list(sides) == ["cache", "cloud", "edge"]
    assert sides["edge"] == {"share": 0.5, "good": 2, "ttft_s": {"p50": 0.625, "p95": 0.9625, "n": 2}}
    assert sides["cloud"] == {"share": 0.25, "good": 0, "ttft_s": {"p50": 1.5, "p95": 1.5, "n": 1}}
    assert report["ttft_by_kind_s"]["short"]["n"] == 3
    assert report["ttft_by_kind_s"]["short"]["p50"] == 0.25


def test_a_server_that_names_no_route_is_the_direct_side() -> None:
    assert side_of("foreign") == "cloud"
    assert side_of("cache-semantic") == "cache"
    assert side_of("edge") == "edge"
    report = config_report([Result("short", "foreign", True, 1.0, 0.5, 20)], 4.0, 1.0, LoadConfig())
    assert report["goodput"] == 0.25
    assert report["cloud_tokens"] == 20
    assert report["by_side"] == {"cloud": {"share": 1.0, "good": 1, "ttft_s": {"p50": 0.5, "p95": 0.5, "n": 1}}}


def test_short_and_long_workloads_are_the_mix_restricted() -> None:
    assert workload_shares("mix") == {"short": 0.5, "repeat": 0.2, "long_prompt": 0.15, "long_answer": 0.15}
    assert workload_shares("short") == {"short": 0.5, "repeat": 0.2}
    assert workload_shares("long") == {"long_prompt": 0.15, "long_answer": 0.15}
    assert LoadConfig().shares == workload_shares("mix")  # the default is untouched
    for name, kinds in (("short", {"short", "repeat"}), ("long", {"long_prompt", "long_answer"})):
        jobs = list(itertools.islice(workload(LoadConfig(shares=workload_shares(name), seed=0)), 300))
        assert {j.kind for j in jobs} == kinds


def test_cpu_description_from_cpuinfo() -> None:
    avx2 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse avx avx2 fma\n\nprocessor\t: 1\n"
    assert describe_cpu(avx2) == {
        "model": "AMD EPYC 7B13",
        "isa": {"avx2": True, "avx512f": False, "avx512_bf16": False, "amx": False},
        "text": "AMD EPYC 7B13 (avx2)",
    }
    sapphire = "model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    assert describe_cpu(sapphire)["text"] == "Intel(R) Xeon(R) Platinum 8480+ (avx2 avx512f avx512_bf16 amx_bf16)"
    assert describe_cpu("") == {
        "model": "",
        "isa": {"avx2": False, "avx512f": False, "avx512_bf16": False, "amx": False},
        "text": f"{platform.machine()} (no AVX2)",  # no /proc/cpuinfo: the machine's name
    }


def test_the_simulated_wan_holds_each_way_for_half_the_round_trip() -> None:
    import socket
    import threading
    import time

    from bench.wan import delayed_proxy

    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    with delayed_proxy("127.0.0.1", server.getsockname()[1], rtt_ms=80) as port:
        with socket.create_connection(("127.0.0.1", port)) as conn:
            began = time.perf_counter()
            conn.sendall(b"ping")
            assert conn.recv(4096) == b"ping"
            first = time.perf_counter() - began
            began = time.perf_counter()
            conn.sendall(b"x" * 100_000)
            got = b""
            while len(got) < 100_000:
                got += conn.recv(65536)
            assert got == b"x" * 100_000  # every byte, in order
            second = time.perf_counter() - began
    server.close()
    # A connect's round trip plus the echo's; then one round trip per exchange, never less.
    assert first >= 0.16 and second >= 0.08


def test_the_prediction_error_and_the_reasons_are_read_from_the_nodes_decision_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from bench.hybrid import decision_summary
    from router.telemetry import DecisionEvent
    from router.telemetry.store import connect

    db = connect(tmp_path / "telemetry.db")
    rows = [("edge", "simple", 100.0), ("edge", "simple", 125.0), ("cloud", "edge-later", 400.0), ("cache-exact", "simple", 5.0)]
    for i, (route, reason, ttft) in enumerate(rows):
        event = DecisionEvent(ts=0.0, request_id=f"r{i}", tenant="t", model="auto", route=route, reason=reason,
                              stream=True, ttft_ms=ttft, features={"edge_ttft_s": 0.1, "cloud_ttft_s": 0.2})
        db["decisions"].insert(event.to_row())
    db.conn.close()
    summary = decision_summary(tmp_path / "telemetry.db")
    errors = summary["ttft_prediction_error"]  # 0, 0.2 and 0.5: the cache hit has no side
    assert errors["n"] == 3 and errors["p50"] == pytest.approx(0.2) and errors["p95"] == pytest.approx(0.47)
    assert summary["reasons"] == {"simple": 3, "edge-later": 1}
    assert list(summary["reasons"]) == ["simple", "edge-later"]  # the most frequent first
    assert decision_summary(tmp_path / "none.db") == {"ttft_prediction_error": {"p50": None, "p95": None, "n": 0},
                                                       "reasons": {}}
