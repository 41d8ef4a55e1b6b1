"""Active health checks of one member: `/health`, `/v1/models`, and vLLM's load gauges from `/metrics`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .transport import MemberHTTP

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
# The share of the KV cache in use, 0 to 1 (older vLLM releases called it gpu_cache_usage_perc).
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


@dataclass(frozen=True, slots=True)
class Scrape:
    """vLLM's load gauges, summed over their labels (engines), and how many of the requests were
    this node's at the time."""

    running: int
    waiting: int
    ours: int
    at: float
    kv_usage: float | None = None  # None: the member does not publish it


@dataclass(frozen=True, slots=True)
class Probe:
    ok: bool | None  # None: inconclusive (timed out while our requests were in flight)
    error: str | None = None
    scrape: Scrape | None = None


def parse_load(text: str, ours: int) -> Scrape | None:
    """vLLM's gauges in a `/metrics` text, or None when the member publishes neither request gauge."""
    requests: dict[str, float] = {}
    kv: list[float] = []
    try:
        for family in text_string_to_metric_families(text):
            values = [s.value for s in family.samples if s.name == family.name]
            if family.name in (RUNNING, WAITING):
                requests[family.name] = requests.get(family.name, 0.0) + sum(values)
            elif family.name in KV_USAGE and not kv:
                kv = values
    except ValueError:
        return None
    if not requests:
        return None
    # Several engines (data parallel) each publish their share: the fullest one bounds admission.
    running, waiting = int(requests.get(RUNNING, 0)), int(requests.get(WAITING, 0))
    return Scrape(running, waiting, ours, time.monotonic(), max(kv) if kv else None)


async def probe(
    client: MemberHTTP, root_url: str, model: str, timeout_s: float, outstanding: int
) -> Probe:
    """Check liveness (`/health`, absent on some servers), that ``model`` is served, and scrape load."""
    try:
        async with asyncio.timeout(timeout_s):
            health = await client.request("GET", f"{root_url}/health")
            if health.status_code != 404 and health.status_code >= 400:
                return Probe(False, f"/health answered {health.status_code}")
            listing = await client.request("GET", "/models")
            if listing.status_code != 200:
                return Probe(False, f"/v1/models answered {listing.status_code}")
            try:
                ids = [m.get("id") for m in listing.json().get("data", [])]
            except (ValueError, AttributeError):
                return Probe(False, "/v1/models is not a model list")
            if model not in ids:
                return Probe(False, f"model {model!r} is not served (serves {ids})")
            metrics = await client.request("GET", f"{root_url}/metrics")
            scrape = parse_load(metrics.text, outstanding) if metrics.status_code == 200 else None
            return Probe(True, None, scrape)
    except TimeoutError:
        # A busy single-slot server (llama.cpp's) may hold probes behind a running request.
        if outstanding > 0:
            return Probe(None, "health check timed out while requests were in flight")
        return Probe(False, f"health check timed out after {timeout_s:g}s")
    except httpx.HTTPError as exc:
        return Probe(False, f"health check failed: {type(exc).__name__}: {exc}")
