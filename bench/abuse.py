"""Two hostile clients against a real edge-only node, each measured against the node left alone
(docs/reliability.md describes both runs).

    python -m bench.abuse fairness [--hogs 2] [--seconds 60]
    python -m bench.abuse stall [--streams 60] [--half-open 300] [--hold 30] [--after 60]

``fairness``: tenant B's short questions, alone, then while tenant A's clients hold the edge with
``n: 8`` long answers. ``stall``: slow readers and half-open connections held, then closed at
once, while a monitor opens a new connection to ``/healthz`` every 100 ms. Loopback only: the node
is started here, on a free port, with its cache off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import describe_cpu, percentile, write_json
from bench.hostile import NODE_ARGS, NODE_ENV
from loadtest.servers import node_process

QUESTIONS = [
    "What is the capital of France?", "How many legs does a spider have?", "What colour is the sky?",
    "Name a prime number.", "What is water made of?", "Who wrote Hamlet?", "What is 7 times 8?",
    "Name a planet.", "What do bees make?", "How many days are in a week?",
]
KEYS = {"key-a": "team-a", "key-b": "team-b"}


class Monitor:
    """``request()`` every ``every_s`` on a thread of its own (default: ``/healthz`` on a new
    connection, as an outside monitor probes); the round trips in ms per ``phase`` (a refused or
    timed-out probe counts as its time until it failed)."""

    def __init__(
        self, base: str, every_s: float = 0.1, request: Callable[[], httpx.Response] | None = None
    ) -> None:
        self.request = request or (lambda: httpx.get(base + "/healthz", timeout=60))
        self.every_s, self.phase = every_s, "before"
        self.times: dict[str, list[float]] = {}
        self.failed: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def worst(self) -> dict[str, float]:
        return {phase: max(times) for phase, times in self.times.items()}

    def _run(self) -> None:
        while not self._stop.is_set():
            phase, began = self.phase, time.perf_counter()
            try:
                ok = self.request().status_code == 200
            except httpx.HTTPError:
                ok = False
            self.times.setdefault(phase, []).append((time.perf_counter() - began) * 1000)
            if not ok:
                self.failed[phase] = self.failed.get(phase, 0) + 1
            self._stop.wait(self.every_s)


def _body(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}], "stream": True, **extra}


def _has_text(event: str) -> bool:
    choices = json.loads(event).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


async def _ttft(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[int, float | None]:
    began = time.perf_counter()
    first = None
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if first is None and line.startswith("data: {") and _has_text(line[6:]):
                first = time.perf_counter() - began
    return resp.status_code, first


async def _asker(base: str, seconds: float) -> list[float]:
    """Tenant B: one short question after another; each first token's time."""
    out: list[float] = []
    headers = {"authorization": "Bearer key-b"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=300) as client:
        end, i = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            status, first = await _ttft(client, _body(QUESTIONS[i % len(QUESTIONS)], max_tokens=32, temperature=0))
            i += 1
            if status == 200 and first is not None:
                out.append(first)
    return out


async def _hog(base: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Tenant A: ``n: 8`` long sampled answers, back to back."""
    body = _body("Write a very long story about a dragon.", n=8, max_tokens=1900, temperature=1, cache=False)
    async with httpx.AsyncClient(base_url=base, headers={"authorization": "Bearer key-a"}, timeout=900) as client:
        while not stop.is_set():
            wait = 0.0
            try:
                async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
                    key = str(resp.status_code)
                    if resp.status_code == 429:
                        wait = float(resp.headers.get("retry-after", "1"))
                    async for _ in resp.aiter_bytes():
                        if stop.is_set():
                            break
            except httpx.HTTPError as exc:
                key = type(exc).__name__
            counts[key] = counts.get(key, 0) + 1
            if wait:
                await asyncio.sleep(wait)


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": round(percentile(values, 50) * 1000),
            "p95_ms": round(percentile(values, 95) * 1000), "max_ms": round(max(values) * 1000)}


async def fairness(base: str, hogs: int, seconds: float, warmup: float) -> dict[str, Any]:
    with Monitor(base) as monitor:
        monitor.phase = "alone"
        alone = await _asker(base, seconds)
        monitor.phase = "hogged"
        stop, counts = asyncio.Event(), {}
        tasks = [asyncio.create_task(_hog(base, stop, counts)) for _ in range(hogs)]
        await asyncio.sleep(warmup)  # A holds the slots before B asks
        hogged = await _asker(base, seconds)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"b_alone": _stats(alone), "b_while_a_holds_the_edge": _stats(hogged), "a_requests": counts,
            "healthz_max_ms": {k: round(v) for k, v in monitor.worst.items()}}


async def _slow_reader(base: str, hold: asyncio.Event) -> None:
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    payload = json.dumps(_body("Write a very long story about the sea.", max_tokens=1900, temperature=1,
                               cache=False)).encode()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 + f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
    await writer.drain()
    while not hold.is_set():
        await reader.read(1)
        await asyncio.sleep(1)
    writer.transport.abort()  # gone at once, as a killed client goes


async def _half_open(base: str, hold: asyncio.Event) -> None:
    host, port = base.removeprefix("http://").split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n")  # never finished
    await writer.drain()
    await hold.wait()
    writer.transport.abort()


async def stall(base: str, streams: int, half_open: int, hold_s: float, after_s: float) -> dict[str, Any]:
    with Monitor(base) as monitor:
        await asyncio.sleep(5)
        monitor.phase = "held"
        release = asyncio.Event()
        tasks = [asyncio.create_task(_slow_reader(base, release)) for _ in range(streams)]
        tasks += [asyncio.create_task(_half_open(base, release)) for _ in range(half_open)]
        await asyncio.sleep(hold_s)
        release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        monitor.phase = "after close"
        await asyncio.sleep(after_s)
    errors = [type(r).__name__ for r in results if isinstance(r, BaseException)]
    return {"streams": streams, "half_open": half_open, "hold_s": hold_s, "after_s": after_s,
            "client_errors": len(errors), "healthz_max_ms": {k: round(v) for k, v in monitor.worst.items()},
            "healthz_failed": monitor.failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="run", required=True)
    fair = sub.add_parser("fairness")
    fair.add_argument("--hogs", type=int, default=2, help="tenant A's clients, each with n=8 long answers")
    fair.add_argument("--seconds", type=float, default=60, help="tenant B's questions, each phase")
    fair.add_argument("--warmup", type=float, default=10, help="A's head start before B asks")
    st = sub.add_parser("stall")
    st.add_argument("--streams", type=int, default=60)
    st.add_argument("--half-open", type=int, default=300)
    st.add_argument("--hold", type=float, default=30)
    st.add_argument("--after", type=float, default=60)
    for p in (fair, st):
        p.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()
    env = {"EDGEROUTE_SERVER__API_KEYS": json.dumps(KEYS)} if args.run == "fairness" else {}
    with (
        tempfile.TemporaryDirectory(prefix="edgeroute-abuse-") as tmp,
        node_process(*NODE_ARGS, "--data-dir", tmp, log_path=Path(tmp) / "node.log", env={**NODE_ENV, **env}) as node,
    ):
        if args.run == "fairness":
            summary = asyncio.run(fairness(node.base, args.hogs, args.seconds, args.warmup))
        else:
            summary = asyncio.run(stall(node.base, args.streams, args.half_open, args.hold, args.after))
    summary = {"run": args.run, "cpu": describe_cpu()["text"], "date": time.strftime("%Y-%m-%d"), **summary}
    for key, value in summary.items():
        print(f"{key:>26}  {value}")
    print(json.dumps(summary))
    if args.json:
        write_json(args.json, summary, indent=1)


if __name__ == "__main__":
    main()
