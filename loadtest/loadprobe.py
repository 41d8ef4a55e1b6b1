"""The probe of ``edgeroute bench load``: one client per tenant, in a process of its own, asking
one cached question at a steady pace while the load runs, and timing each answer. The load's own
clients measure through the load generator (hundreds of Python clients queue in their process
before a byte is sent); the probe sees what one ordinary client of that tenant sees.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

QUESTION = "What is the capital of France?"


def _body(max_tokens: int) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": QUESTION}], "temperature": 0,
            "max_tokens": max_tokens, "stream": True}


def prime(target: str, key: str | None, max_tokens: int) -> int:
    """Ask ``QUESTION`` once, before the load, so the cache holds it; the status."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    url = target.rstrip("/") + "/v1/chat/completions"
    return httpx.post(url, json={**_body(max_tokens), "stream": False}, headers=headers, timeout=120).status_code


def probe(target: str, key: str | None, duration_s: float, interval_s: float, max_tokens: int) -> dict[str, Any]:
    """Ask ``QUESTION`` every ``interval_s`` until ``duration_s`` has passed (made once first, if
    :func:`prime` did not); the latencies (ms, send to last byte) of the answers that were hits."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    body = _body(max_tokens)
    hits: list[float] = []
    other: dict[str, int] = {}
    url = target.rstrip("/") + "/v1/chat/completions"
    with httpx.Client(headers=headers, timeout=120) as client:
        end = time.monotonic() + duration_s
        # Made once: the edge answers and the cache keeps it. A tenant beyond its share of the
        # edge is refused (429) here too: wait as told and ask again.
        while time.monotonic() < end:
            made = client.post(url, json={**body, "stream": False})
            if made.status_code == 200:
                break
            time.sleep(min(5.0, float(made.headers.get("retry-after", "1"))))
        while time.monotonic() < end:
            start = time.perf_counter()
            with client.stream("POST", url, json=body) as resp:
                for _ in resp.iter_bytes():
                    pass
            elapsed = (time.perf_counter() - start) * 1000
            route = resp.headers.get("x-edgeroute-route", "")
            if resp.status_code == 200 and route.startswith("cache-"):
                hits.append(elapsed)
            else:
                name = f"http-{resp.status_code}" if resp.status_code != 200 else route or "other"
                other[name] = other.get(name, 0) + 1
            time.sleep(max(0.0, interval_s - elapsed / 1000))
    return {"hits_ms": hits, "other": other}


def read_rss_mb(pid: int) -> float | None:
    """The resident set of process ``pid`` in MB (Linux ``/proc``), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
