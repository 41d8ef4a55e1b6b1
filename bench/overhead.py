"""What the node adds in front of a cloud member: the latency of a 1-token request through the node
(``model: cloud``, cache off) minus the same request sent to the member directly (docs/cloud.md).

    python -m bench.overhead [--member vllm|llama|echo] [--pairs 200] [--warmup 20]
                             [--json artifacts/bench_overhead.json] [--against DIR]

The member (vLLM's ``edgeroute cloud serve``, llama.cpp's server, or ``bench.pool``'s echo server:
the node's own cost) is the node's only member, on loopback. Direct and routed requests alternate
(the order rotates every round) on kept-alive connections, so machine noise hits both alike; the
figure is the median of the paired differences, for a whole answer and for a stream.
``--against DIR`` times a node from another checkout in the same rounds: a regression check that
the machine's load cannot bias.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.harness import write_json
from loadtest.servers import NodeProcess, free_port, node_process
from models import EDGE_DEFAULT, default_models_dir, resolve

ALIAS = "llama-member"


def _timed(call: Callable[[], httpx.Response]) -> float:
    started = time.perf_counter()
    resp = call()
    elapsed = (time.perf_counter() - started) * 1000
    if resp.status_code != 200:
        raise SystemExit(f"{resp.request.url} answered {resp.status_code}: {resp.text[:300]}")
    return elapsed


def _summary(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=20)
    return {"p50": statistics.median(values), "p05": q[0], "p95": q[-1], "mean": statistics.fmean(values)}


def median_interval(values: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of the median: how far the p50 itself moves with the rounds drawn."""
    rng = np.random.default_rng(seed)
    data = np.asarray(values, dtype=np.float64)
    medians = np.median(rng.choice(data, size=(resamples, data.size), replace=True), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def measure(
    member: str, nodes: dict[str, str], pairs: int, warmup: int, stream: bool, alias: str = ALIAS
) -> dict[str, Any]:
    """Each round times the member directly and every node once, in an order that rotates."""
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0, "stream": stream}

    def post(client: httpx.Client, url: str, model: str) -> httpx.Response:
        if not stream:
            return client.post(url, json={**body, "model": model})
        with client.stream("POST", url, json={**body, "model": model}) as resp:
            resp.read()
            return resp

    clients = {name: httpx.Client(timeout=60) for name in ["direct", *nodes]}
    try:
        calls = {"direct": partial(post, clients["direct"], member + "/v1/chat/completions", alias)}
        calls.update({name: partial(post, clients[name], url + "/v1/chat/completions", "cloud") for name, url in nodes.items()})
        first = next(iter(nodes))
        health = lambda: clients[first].get(nodes[first] + "/healthz")  # noqa: E731
        order = list(calls)
        for _ in range(warmup):
            for call in calls.values():
                _timed(call)
        times: dict[str, list[float]] = {name: [] for name in calls}
        health_ms = []
        for i in range(pairs):
            rotated = order[i % len(order) :] + order[: i % len(order)]
            for name in rotated:
                times[name].append(_timed(calls[name]))
            health_ms.append(_timed(health))
    finally:
        for client in clients.values():
            client.close()
    out: dict[str, Any] = {"stream": stream, "pairs": pairs, "direct_ms": _summary(times["direct"])}
    for name in nodes:
        diffs = [n - d for n, d in zip(times[name], times["direct"], strict=True)]
        added = _summary(diffs)
        added["p50_ci95"] = list(median_interval(diffs))
        out[name] = {"added_ms": added, "node_ms": _summary(times[name])}
    out["healthz_ms"] = _summary(health_ms)
    return out


def _edgeroute(tree: Path) -> list[str]:
    """The ``edgeroute`` command of ``tree``, its packages first on the path: edgeroute/cli.py, or in
    older trees dashboard/ or router/cli.py."""
    module = next((m for m in ("edgeroute", "dashboard", "router") if (tree / m / "cli.py").is_file()), "router")
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); from {module}.cli import main; main()"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", type=Path, default=Path("artifacts/bench_overhead.json"))
    ap.add_argument("--against", type=Path, help="a second node from this checkout, timed in the same rounds")
    ap.add_argument("--member", choices=["vllm", "llama", "echo"], default="vllm", help="the server behind the node")
    args = ap.parse_args()
    alias = {"vllm": EDGE_DEFAULT, "llama": ALIAS, "echo": "echo"}[args.member]

    work = Path(tempfile.mkdtemp(prefix="edgeroute-overhead-"))
    gguf = resolve(EDGE_DEFAULT, default_models_dir()).path
    member_port = free_port()
    member_url = f"http://127.0.0.1:{member_port}"
    config = work / "node.toml"
    config.write_text(
        "[cache]\nenabled = false\n\n[cloud]\nlocal_member = false\n\n"
        f'[[cloud.members]]\nname = "{args.member}"\nbase_url = "{member_url}/v1"\nmodel = "{alias}"\n'
    )
    member = {
        "vllm": [sys.executable, "-m", "cloud.member", "--port", str(member_port)],
        "echo": [sys.executable, "-m", "bench.pool", "--serve-echo", str(member_port)],
        "llama": [sys.executable, "-m", "bench.llamaref", "--model", str(gguf), "--model_alias", ALIAS,
                  "--host", "127.0.0.1", "--port", str(member_port), "--n_threads", "1", "--n_ctx", "2048",
                  # By default a request arriving mid-stream (the nodes' health probes take the same lock)
                  # cuts the stream short without an end; a pool member queues instead.
                  "--interrupt_requests", "False"],
    }[args.member]
    trees = {"node": Path(__file__).resolve().parents[1]}
    if args.against is not None:
        trees["against"] = args.against.resolve()
    with ExitStack() as stack:
        stack.enter_context(NodeProcess(member, member_url, ready_path="/v1/models", log_path=work / "member.log",
                                        timeout=900, what="the member").running())  # vLLM compiles the model first
        urls = {
            name: stack.enter_context(node_process(
                "--config", str(config), "--data-dir", str(work / name), "--log-level", "warning",
                command=_edgeroute(tree), log_path=work / f"{name}.log", timeout=180,
            )).base
            for name, tree in trees.items()
        }
        results = [measure(member_url, urls, args.pairs, args.warmup, stream, alias) for stream in (False, True)]
    for r in results:
        d, h = r["direct_ms"], r["healthz_ms"]
        for name in trees:
            a = r[name]["added_ms"]
            print(
                f"{'stream' if r['stream'] else 'whole '} {name}: adds {a['p50']:+.2f} ms p50 "
                f"(95% interval of the p50 {a['p50_ci95'][0]:+.2f} to {a['p50_ci95'][1]:+.2f}; "
                f"p05 {a['p05']:+.2f}, p95 {a['p95']:+.2f}) over {d['p50']:.2f} ms direct; "
                f"GET /healthz {h['p50']:.2f} ms ({r['pairs']} rounds)"
            )
    served_by = {"vllm": "vllm (edgeroute cloud serve)", "llama": "llama_cpp.server", "echo": "bench.pool echo"}[args.member]
    write_json(args.json, {"member": served_by, "results": results})


if __name__ == "__main__":
    main()
