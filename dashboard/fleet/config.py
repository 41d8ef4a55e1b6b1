"""Typed settings of the fleet dashboard (``edgeroute dashboard --prometheus URL``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

# Prometheus durations as PromQL takes them in a range selector ("30s", "5m", "1h").
DURATION = r"^[1-9][0-9]*(ms|s|m|h|d)$"
# A job name goes into a PromQL label matcher: no quote or backslash can get in.
JOB = r"^[A-Za-z0-9_.:-]{1,100}$"


class FleetSettings(BaseModel):
    """Where the fleet's numbers come from and how they are summed."""

    model_config = ConfigDict(extra="forbid")

    prometheus_url: HttpUrl
    # The scrape jobs of the nodes and of the pool's vLLM members (deploy/prometheus/prometheus.yml).
    nodes_job: str = Field("edgeroute", pattern=JOB)
    members_job: str = Field("vllm", pattern=JOB)
    # Route split, hit rates, percentiles and fallbacks are over ``window``; requests/s over
    # ``rate_window`` (at least two scrape intervals, or rate() has too few points).
    window: str = Field("5m", pattern=DURATION)
    rate_window: str = Field("1m", pattern=DURATION)
    tick_s: float = Field(2.0, gt=0, le=60, description="how often open pages are refreshed")
    # Every open page and API call within this share one round of queries to Prometheus.
    max_age_s: float = Field(1.0, ge=0, le=60)
    timeout_s: float = Field(5.0, gt=0, le=60, description="per Prometheus query")
    path: str = Field("/fleet", pattern=r"^/[A-Za-z0-9_\-/]*[A-Za-z0-9_\-]$")
