"""Bad requests against a real edge-only node, and what the rest of the node sees meanwhile.

    python -m bench.reliability [--rounds 3]

For each bad request (20,000 small messages, one 4 MB message, JSON nested 100,000 deep, and a
heavy prompt within the caps: 2,000 messages of ~400 characters), it reports the status and time
of the bad request, and the worst `/healthz` and exact-cache-hit latencies measured by two other
clients while it was in flight.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.abuse import Monitor
from edgeroute.app import create_app
from loadtest.servers import serve_app
from router import load_settings

HIT = {"model": "edge", "max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": "Say hi."}]}


def _bad_requests() -> dict[str, bytes]:
    many = [{"role": "user", "content": f"m{i}"} for i in range(20_000)]
    heavy = [{"role": "user", "content": f"{i} " + "lorem ipsum dolor sit amet " * 15} for i in range(2000)]
    return {
        "20,000 messages": json.dumps({"messages": many, "max_tokens": 1}).encode(),
        "one 4 MB message": json.dumps({"messages": [{"role": "user", "content": "a" * 4_000_000}]}).encode(),
        "JSON 100,000 deep": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "2,000 x 400 chars (within caps)": json.dumps({"messages": heavy, "max_tokens": 1}).encode(),
    }


def _run(base: str, rounds: int) -> None:
    first = httpx.post(base + "/v1/chat/completions", json=HIT, timeout=60)  # stored; later ones are hits
    first.raise_for_status()
    assert httpx.post(base + "/v1/chat/completions", json=HIT, timeout=60).headers["x-edgeroute-route"] == "cache-exact"
    print(f"{'bad request':<34} {'status':>6} {'time ms':>9} {'healthz max ms':>15} {'cache hit max ms':>17}")
    for name, body in _bad_requests().items():
        for _ in range(rounds):
            with (
                httpx.Client(base_url=base, timeout=60) as one,
                httpx.Client(base_url=base, timeout=60) as other,
                Monitor(base, 0.005, lambda: one.get("/healthz")) as health_probe,
                Monitor(base, 0.005, lambda: other.post("/v1/chat/completions", json=HIT)) as hit_probe,
            ):
                time.sleep(0.2)
                started = time.perf_counter()
                resp = httpx.post(base + "/v1/chat/completions", content=body,
                                  headers={"content-type": "application/json"}, timeout=120)
                took = (time.perf_counter() - started) * 1000
                time.sleep(0.1)
            health, hits = health_probe.times["before"], hit_probe.times["before"]
            print(f"{name:<34} {resp.status_code:>6} {took:>9.0f} {max(health):>15.1f} {max(hits):>17.1f}"
                  f"   (p50 {statistics.median(health):.1f} / {statistics.median(hits):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp), cloud={"local_member": False})
        with serve_app(create_app(settings)) as base:
            _run(base, args.rounds)


if __name__ == "__main__":
    main()
