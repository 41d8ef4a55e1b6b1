"""Load check: does the dashboard stay responsive with 100 decisions/s flowing? (docs/dashboard.md)

A server process runs the dashboard with the real ``Telemetry`` and records synthetic decisions at
``--rate`` per second from its event loop, as the request path would (the edge model cannot serve
100 real requests/s on 2 cores); this process opens ``--clients`` SSE streams like browser tabs
and polls the pages. Prints a table and a JSON line.

    python bench/dashboard_sse.py --rate 100 --duration 20 --clients 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import httpx
from httpx_sse import connect_sse

from bench.harness import percentile
from loadtest.servers import NodeProcess, free_port

ROUTES = ("edge", "edge", "cloud", "cache-exact", "cache-semantic")


def serve(port: int, rate: float, start_after: float, duration: float, data_dir: Path) -> None:
    import uvicorn
    from litestar import Litestar

    from dashboard import DashboardPlugin
    from router.telemetry import DecisionEvent, Telemetry, TelemetrySettings

    settings = TelemetrySettings()
    telemetry = Telemetry(settings, data_dir)

    node = SimpleNamespace(telemetry=telemetry)  # what the dashboard reads of a node

    async def produce() -> None:
        await asyncio.sleep(start_after)
        interval = 1.0 / rate
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < duration:
            route = random.choice(ROUTES)
            now = time.time()
            telemetry.record(DecisionEvent(
                ts=now, request_id=f"{now:.6f}-{i}", tenant=random.choice(("acme", "globex")), model="auto",
                route=route, reason={"edge": "short-prompt", "cloud": "complex"}.get(route, "hit"),
                prompt_tokens=random.randint(5, 200), completion_tokens=random.randint(5, 300),
                latency_ms=random.lognormvariate(5, 1), ttft_ms=random.lognormvariate(3, 1),
                similarity=0.95 if route == "cache-semantic" else None,
                cache=None if route.startswith("cache") else "miss",
                prompt_preview=f"synthetic prompt number {i} <b>with markup</b>",
                features={"prompt_tokens": 42, "complexity": 0.3},
            ))
            i += 1
            # Sleep to the schedule, not a fixed interval, so the rate holds under load.
            await asyncio.sleep(max(0.0, start + i * interval - time.monotonic()))

    tasks: list[asyncio.Task[None]] = []

    async def startup(app: Litestar) -> None:
        app.state.node = node
        tasks.append(asyncio.create_task(produce()))

    async def shutdown(_: Litestar) -> None:
        for t in tasks:
            t.cancel()
        await telemetry.aclose()
        print(json.dumps({"written": telemetry.store.written if telemetry.store else 0}), flush=True)

    app = Litestar(plugins=[DashboardPlugin(settings)], on_startup=[startup], on_shutdown=[shutdown])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=3)


@dataclass
class ClientStats:
    feed_messages: int = 0
    stats_messages: int = 0
    rows: int = 0
    bytes: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    error: str | None = None


def sse_client(url: str, stop: threading.Event, stats: ClientStats) -> None:
    try:
        events = f"{url}/dashboard/events?topics=feed,stats"
        with httpx.Client(timeout=30) as client, connect_sse(client, "GET", events) as source:
            for sse in source.iter_sse():
                now = time.time()
                stats.bytes += len(sse.data)
                if sse.event == "stats":
                    stats.stats_messages += 1
                if sse.event == "feed":
                    stats.feed_messages += 1
                    for ts in re.findall(r'data-request-id="(\d+\.\d+)-\d+"', sse.data):
                        stats.rows += 1
                        stats.latencies_ms.append((now - float(ts)) * 1000)
                if stop.is_set():
                    return
    except Exception as exc:  # noqa: BLE001 - reported in the results
        stats.error = repr(exc)


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=100.0, help="decisions per second")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load")
    parser.add_argument("--clients", type=int, default=3, help="SSE clients (browser tabs)")
    parser.add_argument("--idle", type=float, default=4.0, help="seconds measured before the load starts")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    warmup = 3.0
    with tempfile.TemporaryDirectory() as tmp:
        call = f"serve({port}, {args.rate!r}, {warmup + args.idle!r}, {args.duration!r}, Path({tmp!r}))"
        argv = [sys.executable, "-c", f"from pathlib import Path; from bench.dashboard_sse import serve; {call}"]
        log = Path(tmp) / "server.log"
        with NodeProcess(argv, url, ready_path="/dashboard", log_path=log, timeout=60).running() as server:
            started = time.monotonic()
            stop = threading.Event()
            clients = [ClientStats() for _ in range(args.clients)]
            for c in clients:
                threading.Thread(target=sse_client, args=(url, stop, c), daemon=True).start()
            time.sleep(max(0.0, started + warmup - time.monotonic()))
            cpu0 = cpu_seconds(server.pid)
            time.sleep(args.idle)
            cpu1, t1 = cpu_seconds(server.pid), time.monotonic()
            at_load = [(c.feed_messages, c.stats_messages, c.bytes) for c in clients]
            page_ms: dict[str, list[float]] = {"/dashboard": [], "/dashboard/feed": [], "/metrics": []}
            with httpx.Client(timeout=30) as http:
                while time.monotonic() - t1 < args.duration:
                    for path, samples in page_ms.items():
                        t = time.perf_counter()
                        http.get(f"{url}{path}").raise_for_status()
                        samples.append((time.perf_counter() - t) * 1000)
                    time.sleep(0.5)
            cpu2, t2 = cpu_seconds(server.pid), time.monotonic()
            at_end = [(c.feed_messages, c.stats_messages, c.bytes) for c in clients]
            stop.set()
        # The server's last word, at shutdown: {"written": N}.
        written = next((json.loads(line)["written"] for line in reversed(log.read_text().splitlines())
                        if line.startswith('{"written"')), None)

    lat = [v for c in clients for v in c.latencies_ms]
    load_s = t2 - t1

    def per_client_s(i: int) -> float:
        """The mean per client of counter ``i`` (feed, stats messages, bytes) per second of load."""
        return statistics.mean(e[i] - b[i] for b, e in zip(at_load, at_end, strict=True)) / load_s

    result = {
        "rate_per_s": args.rate,
        "duration_s": args.duration,
        "clients": args.clients,
        "rows_received_per_client": [c.rows for c in clients],
        # Per client, over the load window only.
        "feed_messages_per_s": round(per_client_s(0), 2),
        "stats_messages_per_s": round(per_client_s(1), 2),
        "sse_kib_per_s": round(per_client_s(2) / 1024, 1),
        "delivery_ms_p50": round(percentile(lat, 50), 1),
        "delivery_ms_p95": round(percentile(lat, 95), 1),
        "delivery_ms_max": round(max(lat), 1) if lat else None,
        "page_ms_p50": {p: round(percentile(v, 50), 1) for p, v in page_ms.items()},
        "page_ms_p95": {p: round(percentile(v, 95), 1) for p, v in page_ms.items()},
        "server_cpu_idle_pct": round(100 * (cpu1 - cpu0) / args.idle, 1),
        "server_cpu_load_pct": round(100 * (cpu2 - cpu1) / load_s, 1),
        "decisions_written": written,
        "client_errors": [c.error for c in clients if c.error],
    }
    rows = [
        ("decisions/s recorded", f"{args.rate:g} for {args.duration:g} s"),
        ("SSE clients", str(args.clients)),
        ("rows received per client", ", ".join(str(c.rows) for c in clients)),
        ("feed / stats SSE messages/s per client",
         f"{result['feed_messages_per_s']} / {result['stats_messages_per_s']}"),
        ("SSE KiB/s per client", str(result["sse_kib_per_s"])),
        ("delivery p50 / p95 / max (ms)",
         f"{result['delivery_ms_p50']} / {result['delivery_ms_p95']} / {result['delivery_ms_max']}"),
        *[(f"GET {p} p50 / p95 (ms)", f"{result['page_ms_p50'][p]} / {result['page_ms_p95'][p]}")
          for p in page_ms],
        ("server CPU idle / under load",
         f"{result['server_cpu_idle_pct']}% / {result['server_cpu_load_pct']}%"),
        ("decisions written to SQLite", str(written)),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
