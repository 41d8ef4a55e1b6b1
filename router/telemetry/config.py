"""Typed settings of telemetry and the dashboard."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PriceSettings(BaseModel):
    """Per-token prices behind the dashboard's "cost saved against all-cloud" estimate."""

    currency: str = "USD"
    cloud_prompt_per_1k: float = Field(0.0005, ge=0, description="cloud price per 1k prompt tokens")
    cloud_completion_per_1k: float = Field(0.0015, ge=0, description="cloud price per 1k completion tokens")
    edge_per_1k: float = Field(0.0, ge=0, description="edge cost per 1k tokens (energy, amortised box)")
    cache_per_1k: float = Field(0.0, ge=0, description="cost per 1k tokens answered from the cache")

    def cost(self, route: str, prompt_tokens: int, completion_tokens: int) -> float:
        """What a request's tokens cost where ``route`` answered it (the cloud's price for
        ``cloud``; an error costs nothing). The dashboard's estimate and ``router replay`` both use it."""
        if route == "cloud":
            return prompt_tokens / 1000 * self.cloud_prompt_per_1k + completion_tokens / 1000 * self.cloud_completion_per_1k
        per_1k = self.edge_per_1k if route == "edge" else self.cache_per_1k if route.startswith("cache-") else 0.0
        return (prompt_tokens + completion_tokens) / 1000 * per_1k


class DashboardSettings(BaseModel):
    """The browser dashboard served by the node."""

    enabled: bool = True
    path: str = Field("/dashboard", pattern=r"^/[A-Za-z0-9_\-/]*[A-Za-z0-9_\-]$")
    feed_rows: int = Field(200, ge=10, le=5000, description="rows the live feed keeps")
    stats_interval_s: float = Field(1.0, gt=0, le=60, description="most frequent counter refresh per client")
    tick_s: float = Field(2.0, gt=0, le=60, description="refresh of pool and cache panels without traffic")


class TelemetrySettings(BaseModel):
    """Telemetry log and the dashboard's cost estimate.

    ``enabled`` switches the SQLite decision log; the live dashboard and /metrics keep working
    from memory either way.
    """

    enabled: bool = True
    db_file: str = Field("telemetry.db", description="file name of the decision log in the data dir")
    write_interval_s: float = Field(0.5, gt=0, le=60, description="longest a decision waits to be written")
    write_batch: int = Field(500, ge=1, description="most rows written in one transaction")
    retention_days: float = Field(30.0, gt=0, description="decisions older than this are deleted")
    max_rows: int = Field(1_000_000, ge=1000, description="the log keeps at most this many rows")
    bus_interval_ms: int = Field(250, ge=10, le=10_000, description="live events are batched this long")
    bus_queue: int = Field(64, ge=1, description="batches a slow dashboard client may lag before drops")
    window_s: int = Field(300, ge=10, le=86_400, description="rolling window of the dashboard's numbers")
    rate_window_s: int = Field(10, ge=1, description="window of the requests/s figure")
    recent: int = Field(1000, ge=10, description="decisions kept in memory for the feed and details")
    prices: PriceSettings = Field(default_factory=PriceSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
