"""Edge decode speed through the HTTP API vs raw ``llama_cpp.Llama``, same model and prompt, one run.

    python -m bench.edge_api [--rounds 9] [--ttft-rounds 40] [--max-tokens 128] [--threads N] [--json out.json]

Prints a table and writes JSON. Rounds alternate raw and API so drift hits both alike. Decode
speed comes from ``--rounds`` long generations; the added time to first token is the median of
the paired differences (API minus the raw round just before it) over ``--ttft-rounds`` short
ones, because on a shared 2-core box one round's TTFT swings by more than the overhead measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import httpx
from httpx_sse import connect_sse

from bench.harness import machine, write_json
from bench.llamaref import reference_llama
from loadtest.servers import node_process
from models import EDGE_DEFAULT, default_models_dir, resolve

PROMPT = "1, 2, 3, 4, 5,"


def raw_round(llm, max_tokens: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    llm.reset()  # no prefix reuse: the node runs with edge.prefix_reuse off for this bench
    start = time.perf_counter()
    stamps = [time.perf_counter() for _ in llm.create_completion(PROMPT, max_tokens=max_tokens, temperature=0,
                                                                 stream=True)]
    return _stats(start, stamps, len(stamps))


def api_round(base: str, max_tokens: int) -> dict[str, float]:
    # cache off: this measures generation, and a repeated greedy prompt would be a cache hit
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "seed": 1, "stream": True, "cache": False,
            "stream_options": {"include_usage": True}}
    stamps: list[float] = []
    n = 0
    with httpx.Client(timeout=120) as client:
        start = time.perf_counter()
        with connect_sse(client, "POST", base + "/v1/completions", json=body) as events:
            for sse in events.iter_sse():
                if sse.data == "[DONE]":
                    break
                chunk = json.loads(sse.data)
                if chunk.get("usage"):
                    n = chunk["usage"]["completion_tokens"]
                if chunk["choices"] and chunk["choices"][0]["text"]:
                    stamps.append(time.perf_counter())
    return _stats(start, stamps, n)


def _stats(start: float, stamps: list[float], n_tokens: int) -> dict[str, float]:
    ttft = (stamps[0] - start) * 1000
    decode_s = stamps[-1] - stamps[0]
    return {"ttft_ms": ttft, "decode_tok_s": (n_tokens - 1) / decode_s if decode_s > 0 else 0.0, "tokens": n_tokens}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--ttft-rounds", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--threads", type=int, default=None,
                    help="llama.cpp threads on both sides (default: the node's default, llama_cpp's own)")
    ap.add_argument("--json", type=Path, default=Path("artifacts/bench_edge_api.json"))
    args = ap.parse_args()

    spec = resolve(EDGE_DEFAULT, default_models_dir())
    # Same work on both sides: the node would otherwise keep the repeated prompt's KV.
    env = {"EDGEROUTE_EDGE__PREFIX_REUSE": "false"}
    env |= {"EDGEROUTE_EDGE__N_THREADS": str(args.threads)} if args.threads is not None else {}
    threads = {"n_threads": args.threads, "n_threads_batch": args.threads} if args.threads else {}
    with node_process("--data-dir", "artifacts/bench-edge-data", "--log-level", "warning", "--no-local-member",
                      port=args.port, env=env, timeout=120) as node:
        llm = reference_llama(str(spec.path), n_ctx=2048, n_batch=256, verbose=False, **threads)
        try:
            raw_round(llm, 8), api_round(node.base, 8)  # warm-up
            # each pair in order: the raw round, then the API's
            long = [(raw_round(llm, args.max_tokens), api_round(node.base, args.max_tokens)) for _ in range(args.rounds)]
            short = [(raw_round(llm, 2)["ttft_ms"], api_round(node.base, 2)["ttft_ms"]) for _ in range(args.ttft_rounds)]
        finally:
            llm.close()
    raw, api = zip(*long, strict=True)
    raw_ttft, api_ttft = zip(*short, strict=True)

    def med(rows: tuple[dict[str, float], ...]) -> float:
        return statistics.median(r["decode_tok_s"] for r in rows)

    diffs = sorted(a - r for a, r in zip(api_ttft, raw_ttft, strict=True))
    result = {
        "machine": machine(),
        "model": spec.alias, "prompt": PROMPT, "max_tokens": args.max_tokens, "threads": args.threads,
        "rounds": args.rounds, "ttft_rounds": args.ttft_rounds,
        "raw": {"decode_tok_s": med(raw), "ttft_ms": statistics.median(raw_ttft)},
        "api": {"decode_tok_s": med(api), "ttft_ms": statistics.median(api_ttft)},
        "ratio_decode": med(api) / med(raw),
        "added_ttft_ms": statistics.median(diffs),
        "added_ttft_ms_iqr": [diffs[len(diffs) // 4], diffs[(3 * len(diffs)) // 4]],
    }
    print(f"edge decode, {spec.alias}, {args.max_tokens} tokens, median of {args.rounds} alternating rounds;"
          f" TTFT: median of {args.ttft_rounds} alternating short rounds")
    print(f"{'path':<16}{'decode tok/s':>14}{'TTFT ms':>10}")
    print(f"{'raw llama_cpp':<16}{result['raw']['decode_tok_s']:>14.1f}{result['raw']['ttft_ms']:>10.1f}")
    print(f"{'HTTP API (SSE)':<16}{result['api']['decode_tok_s']:>14.1f}{result['api']['ttft_ms']:>10.1f}")
    lo, hi = result["added_ttft_ms_iqr"]
    print(f"API/raw decode ratio: {result['ratio_decode']:.3f}   added TTFT (median of paired differences):"
          f" {result['added_ttft_ms']:+.1f} ms (IQR {lo:+.1f} .. {hi:+.1f})")
    write_json(args.json, result)


if __name__ == "__main__":
    main()
