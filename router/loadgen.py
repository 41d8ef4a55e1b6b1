"""``edgeroute bench load``: concurrent streaming clients against any OpenAI-compatible server.

Closed loop: ``clients`` tasks each send one request after another from one shared, seeded
workload until ``requests`` have been sent or ``duration_s`` has passed. Scenarios:

- ``mix``: short questions, rephrased repeats (the duplicate pairs of a QQP file: first one side,
  later the other), long prompts and long answers, in the given shares;
- ``streams``: distinct prompts, every answer ``max_tokens`` long (throughput at N streams);
- ``short-behind-long``: 7 (``clients - 1``) long answers run while one client asks short
  questions one after another; the short ones' TTFT is what it measures.

Reports aggregate completion tokens/s, latency and TTFT p50/p95/p99 per route
(``x-edgeroute-route``; ``foreign`` for servers that do not send it), route shares and errors.
Only loopback targets: it is a benchmark, not a load test of someone else's server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from httpx_sse import aconnect_sse

SHORT = (
    "What is the capital of France?",
    "Say hello in Spanish.",
    "What colour is the sky?",
    "How many days are in a week?",
    "Name a fruit that is yellow.",
    "What is two plus two?",
    "Who wrote Hamlet?",
    "What is water made of?",
)
TOPICS = ("a lighthouse keeper", "a lost robot", "the first city on Mars", "a dragon who bakes bread",
          "a detective cat", "an old sailing ship", "a winter in the mountains", "a secret garden",
          "a clockmaker's apprentice", "a river that talks", "a library at night", "a desert caravan")


@dataclass(frozen=True, slots=True)
class Job:
    kind: str
    messages: tuple[dict[str, str], ...]
    max_tokens: int


@dataclass
class Result:
    kind: str
    route: str
    ok: bool
    latency_s: float
    ttft_s: float | None
    tokens: int
    error: str = ""


@dataclass
class LoadConfig:
    target: str = "http://127.0.0.1:8080"
    scenario: str = "mix"
    clients: int = 8
    requests: int = 64
    duration_s: float = 120.0
    max_tokens: int = 64
    long_max_tokens: int = 256
    shares: dict[str, float] = field(
        default_factory=lambda: {"short": 0.5, "repeat": 0.2, "long_prompt": 0.15, "long_answer": 0.15}
    )
    pairs: Path | None = None
    model: str = "auto"
    cache: bool = True
    api_key: str | None = None
    seed: int = 0


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"only loopback targets are allowed (got {host!r})")


def _pairs(path: Path | None, limit: int = 2000) -> list[tuple[str, str]]:
    if path is None or not path.exists():
        return [(q, q.replace("What", "Which").replace("?", ", please?")) for q in SHORT]
    out: list[tuple[str, str]] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("duplicate"):
                out.append((row["a"], row["b"]))
                if len(out) >= limit:
                    break
    return out


def _user(text: str) -> tuple[dict[str, str], ...]:
    return ({"role": "user", "content": text},)


def _long_answer(topic: str, cfg: LoadConfig) -> Job:
    return Job("long_answer", _user(f"Write a long, detailed story about {topic}."), cfg.long_max_tokens)


def workload(cfg: LoadConfig) -> Iterator[Job]:
    """The seeded, endless sequence of requests of ``cfg.scenario``."""
    rng = random.Random(cfg.seed)
    if cfg.scenario == "streams":
        n = 0
        while True:
            topic = TOPICS[n % len(TOPICS)]
            yield Job("stream", _user(f"Write a long story about {topic}. Part {n}."), cfg.max_tokens)
            n += 1
    pairs = _pairs(cfg.pairs)
    rng.shuffle(pairs)
    later: list[str] = []  # the other side of pairs already asked
    kinds = list(cfg.shares)
    weights = [cfg.shares[k] for k in kinds]
    n = 0
    while True:
        kind = rng.choices(kinds, weights)[0]
        n += 1
        if kind == "repeat" and later:
            yield Job("repeat", _user(later.pop(rng.randrange(len(later)))), cfg.max_tokens)
        elif kind in ("short", "repeat"):
            a, b = pairs[n % len(pairs)]
            later.append(b)
            yield Job("short", _user(a), cfg.max_tokens)
        elif kind == "long_prompt":
            context = " ".join(p[0] for p in rng.sample(pairs, min(20, len(pairs))))
            yield Job("long_prompt", _user(f"Here are some questions people asked: {context}\n"
                                           "Which topic comes up most often? Answer in one sentence."),
                      cfg.max_tokens)
        else:
            yield _long_answer(rng.choice(TOPICS), cfg)


async def one_request(client: httpx.AsyncClient, cfg: LoadConfig, job: Job) -> Result:
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": list(job.messages),
        "max_tokens": job.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if not cfg.cache:
        body["cache"] = False  # edgeroute's extension; other servers ignore it
    start = time.perf_counter()
    ttft: float | None = None
    tokens = chunks = 0
    route = "foreign"
    finish: str | None = None
    try:
        url = cfg.target.rstrip("/") + "/v1/chat/completions"
        async with aconnect_sse(client, "POST", url, json=body) as es:
            es.response.raise_for_status()
            route = es.response.headers.get("x-edgeroute-route", "foreign")
            async for sse in es.aiter_sse():
                if sse.data == "[DONE]":
                    break
                data = json.loads(sse.data)
                if data.get("usage"):
                    tokens = int(data["usage"].get("completion_tokens") or 0)
                choices = data.get("choices") or []
                if choices and choices[0].get("finish_reason"):
                    finish = choices[0]["finish_reason"]
                if choices and (choices[0].get("delta") or {}).get("content"):
                    chunks += 1
                    if ttft is None:
                        ttft = time.perf_counter() - start
    except (httpx.HTTPError, json.JSONDecodeError, KeyError, ValueError) as exc:
        # A refusal is counted by its status (429 is deliberate, a 5xx is not): one name hid both.
        name = f"http-{exc.response.status_code}" if isinstance(exc, httpx.HTTPStatusError) else type(exc).__name__
        return Result(job.kind, route, False, time.perf_counter() - start, ttft, 0, name)
    elapsed = time.perf_counter() - start
    if finish is None:  # the server closed the stream before the answer ended
        return Result(job.kind, route, False, elapsed, ttft, tokens or chunks, "stream-cut")
    return Result(job.kind, route, True, elapsed, ttft, tokens or chunks)


async def run_load(cfg: LoadConfig) -> dict[str, Any]:
    """Run the scenario; the summary dict (also what ``--json`` writes)."""
    check_loopback(cfg.target)
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    limits = httpx.Limits(max_connections=cfg.clients + 2, max_keepalive_connections=cfg.clients + 2)
    results: list[Result] = []
    short_ttfts: list[float] = []
    jobs = workload(cfg)
    sent = 0
    deadline = time.monotonic() + cfg.duration_s
    stop = asyncio.Event()

    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0), limits=limits, headers=headers) as client:

        def take() -> Job | None:
            nonlocal sent
            if sent >= cfg.requests or time.monotonic() >= deadline or stop.is_set():
                return None
            sent += 1
            return next(jobs)

        async def closed_loop() -> None:
            while (job := take()) is not None:
                results.append(await one_request(client, cfg, job))

        async def long_loop(i: int) -> None:
            job = _long_answer(TOPICS[i % len(TOPICS)], cfg)
            while not stop.is_set() and time.monotonic() < deadline:
                results.append(await one_request(client, cfg, job))

        async def short_loop() -> None:
            await asyncio.sleep(2.0)  # let the long ones start generating
            try:
                for i in range(cfg.requests):
                    if time.monotonic() >= deadline:
                        break
                    r = await one_request(client, cfg, Job("short", _user(SHORT[i % len(SHORT)]), 16))
                    results.append(r)
                    if r.ok and r.ttft_s is not None:
                        short_ttfts.append(r.ttft_s)
                    await asyncio.sleep(0.2)
            finally:
                stop.set()

        t0 = time.perf_counter()
        if cfg.scenario == "short-behind-long":
            await asyncio.gather(short_loop(), *(long_loop(i) for i in range(max(1, cfg.clients - 1))))
        else:
            await asyncio.gather(*(closed_loop() for _ in range(cfg.clients)))
        wall = time.perf_counter() - t0
    summary = summarize(results, wall, cfg)
    if cfg.scenario == "short-behind-long":
        summary["short_ttft_ms"] = _percentiles([t * 1000 for t in short_ttfts])
    return summary


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "n": 0}
    if len(values) == 1:
        return {"p50": values[0], "p95": values[0], "p99": values[0], "n": 1}
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": statistics.median(values), "p95": q[94], "p99": q[98], "n": len(values)}


def summarize(results: list[Result], wall_s: float, cfg: LoadConfig) -> dict[str, Any]:
    ok = [r for r in results if r.ok]
    tokens = sum(r.tokens for r in ok)
    routes = Counter(r.route for r in ok)
    per_route = {}
    for route in sorted(routes):
        mine = [r for r in ok if r.route == route]
        per_route[route] = {
            "requests": routes[route],
            "latency_ms": _percentiles([r.latency_s * 1000 for r in mine]),
            "ttft_ms": _percentiles([r.ttft_s * 1000 for r in mine if r.ttft_s is not None]),
        }
    return {
        "target": cfg.target,
        "scenario": cfg.scenario,
        "clients": cfg.clients,
        "requests": len(results),
        "wall_s": wall_s,
        "completion_tokens": tokens,
        "tokens_per_s": tokens / wall_s if wall_s > 0 else 0.0,
        "route_shares": {k: v / len(ok) for k, v in sorted(routes.items())} if ok else {},
        "per_route": per_route,
        "kinds": dict(Counter(r.kind for r in results)),
        "errors": dict(Counter(r.error for r in results if not r.ok)),
    }


def table(summary: dict[str, Any]) -> str:
    """A plain-text table of a summary."""
    lines = [
        f"{summary['scenario']} against {summary['target']}: {summary['clients']} clients, "
        f"{summary['requests']} requests in {summary['wall_s']:.1f} s, "
        f"{summary['completion_tokens']} tokens, {summary['tokens_per_s']:.1f} tok/s aggregate, "
        f"errors {sum(summary['errors'].values())}",
        f"{'route':<16}{'share':>7}{'n':>5}  {'latency p50/p95/p99 ms':>26}  {'TTFT p50/p95/p99 ms':>24}",
    ]

    def fmt(p: dict[str, float | None]) -> str:
        return "/".join("-" if p[k] is None else f"{p[k]:.0f}" for k in ("p50", "p95", "p99"))

    for route, row in summary["per_route"].items():
        lines.append(
            f"{route:<16}{summary['route_shares'][route]:>7.2f}{row['requests']:>5}  "
            f"{fmt(row['latency_ms']):>26}  {fmt(row['ttft_ms']):>24}"
        )
    if "short_ttft_ms" in summary:
        lines.append(f"short question behind {summary['clients'] - 1} long: TTFT p50/p95/p99 ms "
                     f"{fmt(summary['short_ttft_ms'])} (n={summary['short_ttft_ms']['n']})")
    return "\n".join(lines)
