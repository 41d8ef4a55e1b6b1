"""``edgeroute bench faults``: streamed requests through a node whose cloud members fail.

The members are small OpenAI-compatible processes on loopback (this module run as a script):
each answers a share of requests with a 5xx before the first token and cuts a share of streams
mid-way, and a chaos task kills one with SIGKILL now and then and restarts it a moment later.
The node (the real API and pipeline; the real edge model as the last resort; cache off) runs in
this process. Every stream is checked: it ends with exactly one ``[DONE]``, no error event, a
``finish_reason``, and never more content chunks (or usage tokens) than ``max_tokens``.

With ``engine="vllm"`` (``--engine vllm``) the members are vLLM servers instead, each started by
``edgeroute cloud serve`` under its supervisor: they fail only by being killed (the chaos SIGKILLs
one vLLM server, engine and all, every 20-60 s, and its supervisor restarts it, which takes
minutes on a CPU).

A command, not a test: ``--requests 1000`` is the issue's run; a short run checks the wiring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

MODEL = "faulty"


# -- the member: a tiny OpenAI-compatible server that fails on purpose ---------------------------


def _member(port: int, seed: int, error_rate: float, cut_rate: float) -> None:
    from aiohttp import web  # not at the top: the node's side of this module has no use for it

    rng = random.Random(seed)

    async def handle(request: web.Request) -> web.StreamResponse:
        if not request.path.endswith("/completions"):
            listing = {"object": "list", "data": [{"id": MODEL, "object": "model"}], "status": "ok"}
            return web.json_response(listing)
        body = await request.json() if request.can_read_body else {}
        if rng.random() < error_rate:
            error = {"message": "injected", "type": "server_error", "param": None, "code": None}
            return web.json_response({"error": error}, status=500)
        wanted = int(body.get("max_tokens") or 16)
        cut_at = rng.randrange(1, max(2, wanted)) if rng.random() < cut_rate else None
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        response.force_close()
        await response.prepare(request)
        for i in range(wanted):
            if i == cut_at and request.transport is not None:
                request.transport.abort()  # a mid-stream cut, as a dying member does
                return response
            await response.write(_event({"content": f"t{i} "}, None))
            await asyncio.sleep(0.002)
        usage = {"prompt_tokens": 10, "completion_tokens": wanted, "total_tokens": 10 + wanted}
        await response.write(_event({}, "length", usage) + b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


def _event(delta: dict[str, Any], finish: str | None, usage: dict[str, int] | None = None) -> bytes:
    chunk: dict[str, Any] = {"id": "f", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


# -- the members as processes, and the chaos ---------------------------------------------------


@dataclass
class _Members:
    """The members, each a process group of its own: the scripted server above (``vllm`` False), or
    `edgeroute cloud serve` (a supervisor and the vLLM server it restarts)."""

    ports: list[int]
    vllm: bool = False
    error_rate: float = 0.0
    cut_rate: float = 0.0
    log_dir: Path | None = None
    procs: dict[int, Any] = field(default_factory=dict)  # port -> cloud.member.process.ServerProcess
    kills: int = 0

    def start(self, port: int) -> None:
        # Not at the top: a member (this module's main) starts fast.
        from cloud.member.process import ServerProcess

        if self.vllm:
            # Three members on one host: one thread each, or their spin-waiting threads outnumber the cores.
            argv = [sys.executable, "-m", "cloud.member", "--port", str(port), "--threads", "1"]
        else:
            argv = [sys.executable, "-m", "loadtest.faults", str(port), str(random.getrandbits(32)),
                    str(self.error_rate), str(self.cut_rate)]
        log = self.log_dir / f"{'vllm' if self.vllm else 'member'}-{port}.log" if self.log_dir else None
        self.procs[port] = ServerProcess(argv, f"http://127.0.0.1:{port}/health", log_path=log,
                                         startup_timeout_s=1200)  # vLLM loads and compiles the model first
        self.procs[port].spawn()

    def kill(self, port: int) -> None:
        """SIGKILL a scripted member, or a vLLM member's server (its supervisor restarts it)."""
        if not self.vllm:
            proc = self.procs.pop(port, None)
            if proc is not None:
                proc.kill()
                self.kills += 1
            return
        tasks = Path(f"/proc/{self.procs[port].pid}/task").glob("*/children")  # the supervisor's: its server
        with contextlib.suppress(OSError):  # gone meanwhile
            for pid in [pid for children in tasks for pid in children.read_text().split()]:
                os.killpg(int(pid), signal.SIGKILL)  # the server leads its own process group
                self.kills += 1

    def ready(self, port: int) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        for proc in self.procs.values():  # every member told first, then each waited for
            if proc.alive():
                proc.proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            proc.stop(60)


async def _chaos(members: _Members, rng: random.Random, stop: asyncio.Event) -> None:
    """Kill a member now and then: a scripted one is started again a moment later; a serving vLLM
    member's server is brought back by its supervisor."""
    while not stop.is_set():
        if members.vllm:
            await asyncio.sleep(rng.uniform(20, 60))
            serving = [p for p in members.ports if await asyncio.to_thread(members.ready, p)]
            if serving:
                await asyncio.to_thread(members.kill, rng.choice(serving))
            continue
        await asyncio.sleep(rng.uniform(0.3, 1.5))
        port = rng.choice(members.ports)
        await asyncio.to_thread(members.kill, port)
        await asyncio.sleep(rng.uniform(0.2, 1.0))
        await asyncio.to_thread(members.start, port)


# -- the clients -------------------------------------------------------------------------------


@dataclass
class FaultReport:
    requests: int = 0
    complete: int = 0  # exactly one [DONE], last, a finish_reason, no error event
    over_max_tokens: int = 0
    done_counts: Counter[int] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    routes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    kills: int = 0
    seconds: float = 0.0

    def ok(self) -> bool:
        return self.complete == self.requests and self.over_max_tokens == 0

    def summary(self) -> str:
        lines = [
            f"requests:           {self.requests} in {self.seconds:.1f}s ({self.kills} member kills)",
            f"complete streams:   {self.complete} ({100 * self.complete / max(1, self.requests):.1f}%)",
            f"[DONE] per stream:  {dict(sorted(self.done_counts.items()))}",
            f"over max_tokens:    {self.over_max_tokens}",
            f"statuses:           {dict(sorted(self.statuses.items()))}",
            f"routes:             {dict(sorted(self.routes.items()))}",
        ]
        lines += [f"  failure: {f}" for f in self.failures[:10]]
        return "\n".join(lines)


async def _one(client: httpx.AsyncClient, base: str, i: int, max_tokens: int, report: FaultReport) -> None:
    body = {"model": "cloud", "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"Question {i}: tell me about faults."}]}
    lines: list[str] = []
    try:
        async with client.stream("POST", base + "/v1/chat/completions", json=body) as resp:
            report.statuses[resp.status_code] += 1
            report.routes[resp.headers.get("x-edgeroute-route", "?")] += 1
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    lines.append(line[6:])
    except httpx.HTTPError as exc:
        report.failures.append(f"#{i}: {type(exc).__name__}: {exc}")
        return
    dones = lines.count("[DONE]")
    report.done_counts[dones] += 1
    events = [json.loads(x) for x in lines if x != "[DONE]"]
    errors = [e for e in events if "error" in e]
    finished = any(c.get("finish_reason") for e in events for c in e.get("choices", []))
    tokens = sum(1 for e in events for c in e.get("choices", []) if c.get("delta", {}).get("content"))
    used = next((e["usage"]["completion_tokens"] for e in events if e.get("usage")), 0)
    if tokens > max_tokens or used > max_tokens:
        report.over_max_tokens += 1
        report.failures.append(f"#{i}: {tokens} chunks, usage {used} > max_tokens {max_tokens}")
    if dones == 1 and lines[-1] == "[DONE]" and not errors and finished:
        report.complete += 1
    else:
        report.failures.append(f"#{i}: [DONE] x{dones}, errors {errors[:1]}, finished {finished}")


def run_faults(
    *,
    requests: int = 1000,
    concurrency: int = 8,
    members: int = 3,
    max_tokens: int = 24,
    error_rate: float = 0.2,
    cut_rate: float = 0.2,
    seed: int = 0,
    data_dir: Path,
    app_factory: Any,
    engine: str = "scripted",
) -> FaultReport:
    """Start the members and a node (``app_factory(settings)``), run the clients, report."""
    from models import EDGE_DEFAULT
    from router.settings import load_settings

    from .servers import free_port, serve_app  # not at the top: a member (this module's main) starts fast

    random.seed(seed)
    rng = random.Random(seed)
    ports = [free_port() for _ in range(members)]
    crew = _Members(ports, engine == "vllm", error_rate, cut_rate, log_dir=data_dir)
    if crew.vllm:
        model, timeouts = EDGE_DEFAULT, {"stall_timeout_s": 10.0, "first_token_timeout_s": 30.0}
    else:
        model, timeouts = MODEL, {"stall_timeout_s": 3.0, "first_token_timeout_s": 10.0}
    for port in crew.ports:
        crew.start(port)
    if crew.vllm:
        try:
            for proc in crew.procs.values():
                proc.wait_ready()
        except Exception:
            crew.stop()
            raise
    cloud = {
        "members": [{"name": f"m{i}", "base_url": f"http://127.0.0.1:{p}/v1", "model": model}
                    for i, p in enumerate(crew.ports)],
        "local_member": False, "health_interval_s": 0.5, "retries": 1, "cooldown_s": 0.5,
        "max_cooldown_s": 2.0, **timeouts,
    }
    settings = load_settings(data_dir=data_dir, cloud=cloud, cache={"enabled": False},
                             edge={"max_queue": 256})
    report = FaultReport()
    try:
        with serve_app(app_factory(settings)) as base:

            async def worker(client: httpx.AsyncClient, queue: Iterator[int]) -> None:
                for i in queue:
                    report.requests += 1
                    await _one(client, base, i, max_tokens, report)

            async def main() -> None:
                stop, queue = asyncio.Event(), iter(range(requests))
                chaos = asyncio.create_task(_chaos(crew, rng, stop))
                try:
                    async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10)) as client:
                        await asyncio.gather(*(worker(client, queue) for _ in range(concurrency)))
                finally:
                    stop.set()
                    chaos.cancel()

            started = time.monotonic()
            asyncio.run(main())
            report.seconds = time.monotonic() - started
            report.kills = crew.kills
    finally:
        crew.stop()
    return report


if __name__ == "__main__":
    # A member: python -m loadtest.faults PORT SEED ERROR_RATE CUT_RATE
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _member(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
