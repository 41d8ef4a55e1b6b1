"""An exact cache hit answered over HTTP: latency as a client sees it, keep-alive, one at a time
(the README's "An exact cache hit over HTTP").

    python -m bench.cache_http [--requests 300] [--json artifacts/bench_cache_http.json]

``GET /healthz`` on the same connection is the floor: what any request costs this server and
client. Ollama's and llama.cpp's shapes of the question are asked once first: their default
samplers make them other cache entries.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import machine, percentile, write_json
from loadtest.servers import node_process

BODY = {"model": "auto", "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "temperature": 0, "max_tokens": 16}
OLLAMA = {"model": "auto", "messages": BODY["messages"], "options": {"temperature": 0, "num_predict": 16}, "stream": False}
LLAMA = {"prompt": "The capital of France is", "temperature": 0, "n_predict": 16}
# name -> (path, body): each answered once by the model before it is timed.
NATIVE = {
    "ollama /api/chat": ("/api/chat", OLLAMA),
    "ollama, streamed": ("/api/chat", {**OLLAMA, "stream": True}),
    "llama.cpp /completion": ("/completion", LLAMA),
}


def timed(client: httpx.Client, url: str, body: dict[str, object] | None) -> tuple[float, str]:
    """One request (a GET when ``body`` is None), read to its end: ms and the route it took."""
    start = time.perf_counter()
    resp = client.get(url) if body is None else client.post(url, json=body)
    elapsed = (time.perf_counter() - start) * 1000
    resp.raise_for_status()
    return elapsed, resp.headers.get("x-edgeroute-route", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--json", type=Path, default=Path("artifacts/bench_cache_http.json"))
    args = ap.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="edgeroute-bench-"))  # a fresh, empty cache
    base = f"http://127.0.0.1:{args.port}"
    url = base + "/v1/chat/completions"
    result: dict[str, Any] = {"machine": machine(), "requests": args.requests}
    # Same work as bench.edge_api's node: no prompt-prefix reuse.
    with (
        node_process("--data-dir", str(data_dir), "--log-level", "warning", "--no-local-member", port=args.port,
                     env={"EDGEROUTE_EDGE__PREFIX_REUSE": "false"}, timeout=120),
        httpx.Client(timeout=120) as client,
    ):
        timed(client, url, {**BODY, "cache": False})  # warm the server's code paths
        first_ms, first_route = timed(client, url, BODY)
        result["first"] = {"ms": first_ms, "route": first_route}
        # GET /healthz on the same connection: the floor
        cases = {"healthz": (base + "/healthz", None), "non-streamed": (url, BODY),
                 "streamed": (url, {**BODY, "stream": True})}
        for name, (path, body) in NATIVE.items():
            cases[name] = (base + path, body)
            timed(client, base + path, body)  # the model answers, the cache stores
        for name, (case_url, body) in cases.items():
            times, routes = zip(*(timed(client, case_url, body) for _ in range(args.requests)), strict=True)
            result[name] = {"p50_ms": statistics.median(times), "p99_ms": percentile(times, 99),
                            "routes": sorted(set(routes)) if body is not None else ["-"]}
    print(f"exact cache hit over HTTP, {args.requests} sequential requests on one keep-alive connection")
    print(f"first request (model answers, cache stores): {result['first']['ms']:.1f} ms, "
          f"route {result['first']['route']}")
    print(f"{'request':<24}{'p50 ms':>9}{'p99 ms':>9}  routes")
    for name in cases:
        r = result[name]
        print(f"{name:<24}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}  {','.join(r['routes'])}")
    write_json(args.json, result)


if __name__ == "__main__":
    main()
