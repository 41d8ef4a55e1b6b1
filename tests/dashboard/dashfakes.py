"""Small in-memory stand-ins for the node's parts the dashboard reads (pool, cache, edge).

They implement the dashboard's protocols (``router.telemetry.PoolView``, ``dashboard.views.CacheView``) the
way the real cloud pool and edge cache do, so the pages, fragments, SSE stream and auth can be
checked fast and with exact numbers, no model loaded. test_browser.py checks the same pages
against the real node (real pool members, real cache).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litestar import Litestar

from dashboard import DashboardPlugin
from models import EngineLoad
from router import ServerSettings
from router.telemetry import DecisionEvent, Telemetry, TelemetrySettings


@dataclass
class FakeMember:
    name: str
    base_url: str
    healthy: bool = True
    circuit: str = "closed"
    outstanding: int = 0
    running: int = 0
    waiting: int = 0
    latency_ms_p50: float | None = 120.0
    ttft_ms_p50: float | None = 40.0
    failures: int = 0


@dataclass
class FakePool:
    members: list[FakeMember]

    def status(self) -> list[FakeMember]:
        return list(self.members)

    def kill(self, name: str) -> None:
        for m in self.members:
            if m.name == name:
                m.healthy, m.circuit, m.failures = False, "open", m.failures + 3


@dataclass
class FakeEntry:
    id: int
    tenant: str
    model: str
    prompt: str
    text: str
    tier: str = "edge"
    hits: int = 0
    created_at: float = field(default_factory=time.time)


class FakeCache:
    """Substring search, async like the real cache's I/O methods."""

    def __init__(self, entries: list[FakeEntry], evictions: int = 0) -> None:
        self.entries = {e.id: e for e in entries}
        self.evictions = evictions

    def stats(self) -> dict[str, Any]:
        size = sum(len(e.prompt) + len(e.text) for e in self.entries.values())
        return {
            "entries": len(self.entries),
            "size_bytes": size,
            "evictions": self.evictions,
            "threshold": 0.92,
        }

    def entries_per_tenant(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries.values():
            out[e.tenant] = out.get(e.tenant, 0) + 1
        return out

    async def search(self, text: str, tenant: str | None = None, limit: int = 20) -> list[FakeEntry]:
        found = [
            e
            for e in self.entries.values()
            if text.lower() in e.prompt.lower() and (tenant is None or e.tenant == tenant)
        ]
        return found[:limit]

    async def delete(self, entry_id: int) -> bool:
        return self.entries.pop(entry_id, None) is not None


@dataclass
class FakeEdge:
    running: int = 1
    waiting: int = 3
    capacity: int = 32

    def load(self) -> EngineLoad:
        return EngineLoad(self.running, self.waiting, self.capacity)


@dataclass
class FakeNode:
    """What the dashboard reads from ``app.state.node``."""

    telemetry: Telemetry | None
    edge: FakeEdge | None = None
    pool: FakePool | None = None
    cache: FakeCache | None = None


def make_telemetry(data_dir: Path, **overrides: Any) -> Telemetry:
    return Telemetry(TelemetrySettings(**overrides), data_dir)


def event(request_id: str = "req-1", **fields: Any) -> DecisionEvent:
    base: dict[str, Any] = dict(
        ts=time.time(),
        request_id=request_id,
        tenant="acme",
        model="auto",
        route="edge",
        reason="short-prompt",
        prompt_tokens=12,
        completion_tokens=30,
        latency_ms=180.0,
        ttft_ms=25.0,
        prompt_preview="What is 2+2?",
        features={"prompt_tokens": 12, "complexity": 0.1},
    )
    base.update(fields)
    return DecisionEvent(**base)


def fake_app(
    node: FakeNode,
    api_keys: Mapping[str, str] | None = None,
    operator_keys: Collection[str] = (),
    **server: Any,
) -> Litestar:
    """The dashboard and /metrics on an app whose ``state.node`` is ``node``, behind these keys
    (tenant keys -> tenant, operator keys; ``server``: more of ``ServerSettings``)."""
    settings = node.telemetry.settings if node.telemetry is not None else None

    async def attach(app: Litestar) -> None:
        app.state.node = node

    async def close(_: Litestar) -> None:
        if node.telemetry is not None:
            await node.telemetry.aclose()

    keys = ServerSettings(api_keys=dict(api_keys or {}), operator_keys=list(operator_keys), **server)
    plugin = DashboardPlugin(settings, server=keys)
    return Litestar(plugins=[plugin], on_startup=[attach], on_shutdown=[close])
