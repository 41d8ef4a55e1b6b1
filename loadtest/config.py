"""What ``edgeroute bench load`` runs and what it records: the run's configuration, its tenants,
one request of the workload and one request's result (shared by the generator and the report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
    tenant: str = ""
    refused: list[str] = field(default_factory=list)  # the refusals that were waited out and retried


@dataclass(frozen=True, slots=True)
class Tenant:
    """One group of clients with its own key (None: no key); ``label`` names it in the report."""

    label: str
    key: str | None
    clients: int


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
    tenants: list[Tenant] = field(default_factory=list)  # empty: one group, api_key and clients
    max_retries: int = 2  # as the OpenAI SDK's default
    rss_pid: int | None = None  # sample this process's RSS (the node's) through the run
    probe: bool = False  # one probe client per tenant, in processes of their own (loadtest.loadprobe)

    def groups(self) -> list[Tenant]:
        return self.tenants or [Tenant("all", self.api_key, self.clients)]
