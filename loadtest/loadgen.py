"""``edgeroute bench load``: concurrent streaming clients against any OpenAI-compatible server.

Closed loop: ``clients`` tasks each send one request after another from one shared, seeded
workload until ``requests`` have been sent or ``duration_s`` has passed. Scenarios:

- ``mix``: short questions, rephrased repeats (the duplicate pairs of a QQP file: first one side,
  later the other), long prompts and long answers, in the given shares;
- ``streams``: distinct prompts, every answer ``max_tokens`` long (throughput at N streams);
- ``short-behind-long``: 7 (``clients - 1``) long answers run while one client asks short
  questions one after another; the short ones' TTFT is what it measures.

Reports aggregate completion tokens/s, latency and TTFT p50/p95/p99 per route
(``x-edgeroute-route``; ``foreign`` for servers that do not send it), cache-hit latency, route
shares and errors; with several tenants (``tenants``: a key and a number of clients each) the
same per tenant, and with ``rss_pid`` the node's RSS over the run.

A client answered 429, 408, 409 or 5xx waits and retries as the OpenAI Python SDK does
(``max_retries`` 2: ``retry-after`` when it is 0-60 s, else 0.5 s doubling up to 8 s, with
jitter); a refusal is an error only when the retries are spent.
Only loopback targets: it is a benchmark, not a load test of someone else's server.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import json
import random
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from httpx_sse import aconnect_sse

from cloud.member.launcher import is_loopback
from router.telemetry import GcWatch

from .config import Job, LoadConfig, Result, Tenant
from .loadprobe import prime, probe, read_rss_mb
from .loadreport import percentiles, summarize, table

__all__ = ["Job", "LoadConfig", "Result", "Tenant", "check_loopback", "one_request", "retry_delay_s",
           "run_load", "summarize", "table", "workload"]

SHORT = ("What is the capital of France?", "Say hello in Spanish.", "What colour is the sky?",
         "How many days are in a week?", "Name a fruit that is yellow.", "What is two plus two?",
         "Who wrote Hamlet?", "What is water made of?")
TOPICS = ("a lighthouse keeper", "a lost robot", "the first city on Mars", "a dragon who bakes bread",
          "a detective cat", "an old sailing ship", "a winter in the mountains", "a secret garden",
          "a clockmaker's apprentice", "a river that talks", "a library at night", "a desert caravan")


# The OpenAI Python SDK's retry rule (``openai._base_client``), as the clients follow it.
_RETRIED = {408, 409, 429}
_INITIAL_DELAY_S = 0.5
_MAX_DELAY_S = 8.0


def retry_delay_s(headers: httpx.Headers, retries_done: int, rng: random.Random) -> float:
    """Seconds to wait before retry number ``retries_done + 1``: the server's ``retry-after-ms`` or
    ``retry-after`` when it is within (0, 60], else exponential backoff with jitter."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                wait = float(value) * scale
            except ValueError:
                continue
            if 0 < wait <= 60:
                return wait
    delay = min(_INITIAL_DELAY_S * 2.0**retries_done, _MAX_DELAY_S)
    return delay * (1 - 0.25 * rng.random())


def should_retry(response: httpx.Response) -> bool:
    """Whether the SDK would retry this response (``x-should-retry`` first, then the status)."""
    hint = response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return response.status_code in _RETRIED or response.status_code >= 500


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    if not is_loopback(host):
        raise ValueError(f"only loopback targets are allowed (got {host!r})")


def _pairs(path: Path | None) -> list[tuple[str, str]]:
    """The first 2,000 duplicate pairs of a QQP file (or SHORT, each with a rewording)."""
    if path is None or not path.exists():
        return [(q, q.replace("What", "Which").replace("?", ", please?")) for q in SHORT]
    with path.open(encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh)
        return list(itertools.islice(((r["a"], r["b"]) for r in rows if r.get("duplicate")), 2000))


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


async def one_request(
    client: httpx.AsyncClient, cfg: LoadConfig, job: Job, tenant: str = "", rng: random.Random | None = None
) -> Result:
    """One request as an SDK client makes it: refusals that may be retried are waited out."""
    rng = rng or random.Random()
    refused: list[str] = []
    while True:
        result, response = await _attempt(client, cfg, job)
        result.tenant, result.refused = tenant, refused
        if response is None or len(refused) >= cfg.max_retries or not should_retry(response):
            return result
        refused.append(f"http-{response.status_code}")
        await asyncio.sleep(retry_delay_s(response.headers, len(refused) - 1, rng))


async def _attempt(client: httpx.AsyncClient, cfg: LoadConfig, job: Job) -> tuple[Result, httpx.Response | None]:
    """One HTTP attempt; the refused response comes back too (its status and headers)."""
    body: dict[str, Any] = {"model": cfg.model, "messages": list(job.messages), "max_tokens": job.max_tokens,
                            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
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
            if es.response.is_error:
                # Read the error body, as the SDK does: the connection stays open for the next
                # request (left unread, it is closed, and every retry paid a new connection).
                await es.response.aread()
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
        refused = exc.response if isinstance(exc, httpx.HTTPStatusError) else None
        name = f"http-{refused.status_code}" if refused is not None else type(exc).__name__
        return Result(job.kind, route, False, time.perf_counter() - start, ttft, 0, name), refused
    elapsed = time.perf_counter() - start
    if finish is None:  # the server closed the stream before the answer ended
        return Result(job.kind, route, False, elapsed, ttft, tokens or chunks, "stream-cut"), None
    return Result(job.kind, route, True, elapsed, ttft, tokens or chunks), None


async def run_load(cfg: LoadConfig, sink: list[Result] | None = None) -> dict[str, Any]:
    """Run the scenario; the summary dict (also what ``--json`` writes). ``sink``, when given,
    receives every request's result as it comes (a caller that cancels the run keeps them)."""
    check_loopback(cfg.target)
    if cfg.probe:  # the probes' question answered and cached before the load starts
        await asyncio.gather(*(asyncio.to_thread(prime, cfg.target, g.key, cfg.max_tokens) for g in cfg.groups()))
    results: list[Result] = [] if sink is None else sink
    short_ttfts: list[float] = []
    deadline = time.monotonic() + cfg.duration_s
    stop = asyncio.Event()
    rss: list[float] = []
    groups = cfg.groups()

    # One TLS context for every client: httpx builds one per client otherwise (~10 ms each), and
    # 200 of them held the loop long enough on a loaded box that the last group started late.
    tls = ssl.create_default_context()

    def client_for(group: Tenant, connections: int) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {group.key}"} if group.key else {}
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(timeout=httpx.Timeout(300.0), limits=limits, headers=headers, verify=tls)

    async def closed_loops(index: int, group: Tenant) -> None:
        """The group's clients, each sending its next request when the last one is answered;
        each group (tenant) sends up to ``cfg.requests`` of its own seeded workload."""
        jobs = workload(cfg if index == 0 else replace(cfg, seed=cfg.seed + index))
        sent = 0
        rng = random.Random(cfg.seed + 1000 + index)

        def take() -> Job | None:
            nonlocal sent
            if sent >= cfg.requests or time.monotonic() >= deadline or stop.is_set():
                return None
            sent += 1
            return next(jobs)

        async def loop() -> None:
            # A client of its own per simulated client, as separate SDK clients have: httpcore scans
            # a shared pool on every request, which showed as the node's latency.
            async with client_for(group, 1) as client:
                while (job := take()) is not None:
                    results.append(await one_request(client, cfg, job, group.label, rng))

        await asyncio.gather(*(loop() for _ in range(group.clients)))

    async def short_behind_long(group: Tenant) -> None:
        async with client_for(group, group.clients + 2) as client:

            async def long_loop(i: int) -> None:
                job = _long_answer(TOPICS[i % len(TOPICS)], cfg)
                while not stop.is_set() and time.monotonic() < deadline:
                    results.append(await one_request(client, cfg, job, group.label))

            async def short_loop() -> None:
                await asyncio.sleep(2.0)  # let the long ones start generating
                try:
                    for i in range(cfg.requests):
                        if time.monotonic() >= deadline:
                            break
                        job = Job("short", _user(SHORT[i % len(SHORT)]), 16)
                        r = await one_request(client, cfg, job, group.label)
                        results.append(r)
                        if r.ok and r.ttft_s is not None:
                            short_ttfts.append(r.ttft_s)
                        await asyncio.sleep(0.2)
                finally:
                    stop.set()

            await asyncio.gather(short_loop(), *(long_loop(i) for i in range(max(1, group.clients - 1))))

    async def sample_rss() -> None:
        while cfg.rss_pid is not None:
            value = read_rss_mb(cfg.rss_pid)
            if value is not None:
                rss.append(value)
            await asyncio.sleep(0.5)

    sampler = asyncio.ensure_future(sample_rss())
    probes: dict[str, Any] = {}
    if cfg.probe:  # one probe process per tenant (spawned: nothing of this process's loop is inherited)
        pool = ProcessPoolExecutor(max_workers=len(groups), mp_context=multiprocessing.get_context("spawn"))
        probes = {g.label: pool.submit(probe, cfg.target, g.key, cfg.duration_s, 0.25, cfg.max_tokens)
                  for g in groups}
        pool.shutdown(wait=False)
    # The generator times its own clients, so its collector's pauses would show as the node's
    # latency: its start-up heap is frozen and every pause is reported beside the results.
    pauses: list[float] = []
    watch = GcWatch(lambda _generation, seconds: pauses.append(seconds))
    watch.start(freeze=True)
    t0 = time.perf_counter()
    try:
        if cfg.scenario == "short-behind-long":
            await short_behind_long(groups[0])
        else:
            await asyncio.gather(*(closed_loops(i, g) for i, g in enumerate(groups)))
        probed = {label: await asyncio.wrap_future(f) for label, f in probes.items()}
    finally:
        sampler.cancel()
        watch.close()
    wall = time.perf_counter() - t0
    if cfg.rss_pid is not None and (last := read_rss_mb(cfg.rss_pid)) is not None:
        rss.append(last)
    summary = summarize(results, wall, cfg, rss)
    if probed:
        summary["probe"] = {
            label: {"hit_latency_ms": percentiles(p["hits_ms"]), "other": p["other"]} for label, p in probed.items()
        }
    summary["generator_gc"] = {"collections": len(pauses), "max_ms": round(max(pauses, default=0.0) * 1000, 1),
                               "total_ms": round(sum(pauses) * 1000, 1)}
    if cfg.scenario == "short-behind-long":
        summary["short_ttft_ms"] = percentiles([t * 1000 for t in short_ttfts])
    return summary
