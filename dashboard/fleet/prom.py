"""Reading Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/targets``) with httpx."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx

from models import EdgerouteError


class PrometheusUnavailableError(EdgerouteError):
    """Prometheus did not answer, or answered something that is not a query result (503)."""

    status = 503
    error_type = "service_unavailable"
    retry_after = 5  # seconds: the next round of queries may find it back

    def __init__(self, message: str) -> None:
        super().__init__(message, code="prometheus_unavailable")


@dataclass(frozen=True, slots=True)
class Sample:
    """One element of an instant vector: its labels and its value (NaN/Inf as None)."""

    labels: dict[str, str]
    value: float | None


def _value(raw: Any) -> float | None:
    try:
        number = float(raw)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class Prometheus:
    """A Prometheus server's query API; one connection pool for the dashboard's life."""

    def __init__(
        self, base_url: str, *, timeout_s: float = 5.0, transport: httpx.AsyncBaseTransport | None = None
    ):
        self.base_url = base_url.rstrip("/")
        # Credentials in the URL (https://user:pass@prom/) go out as basic auth, as httpx does.
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s, transport=transport)

    async def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        try:
            response = await self._client.get(path, params=params)
        except httpx.HTTPError as exc:
            raise PrometheusUnavailableError(
                f"Prometheus at {self._client.base_url} did not answer: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            body = response.json()
        except ValueError as exc:
            raise PrometheusUnavailableError(
                f"Prometheus answered {path} with {response.status_code} and no JSON"
            ) from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise PrometheusUnavailableError(
                f"Prometheus answered {path} with {response.status_code}: {error or 'not a success'}"
            )
        return body.get("data")

    async def query(self, promql: str) -> list[Sample]:
        """An instant query's vector."""
        data = await self._get("/api/v1/query", {"query": promql})
        kind = data.get("resultType") if isinstance(data, dict) else None
        result = data.get("result") if isinstance(data, dict) else None
        if kind == "vector" and isinstance(result, list):
            return [
                Sample(dict(item.get("metric", {})), _value(item.get("value", [0, None])[1]))
                for item in result
            ]
        raise PrometheusUnavailableError(f"Prometheus answered a {kind!r} to an instant query: {promql}")

    async def scrape_urls(self, job: str) -> dict[str, str]:
        """``instance`` -> the URL Prometheus scrapes it at, for the active targets of ``job``."""
        data = await self._get("/api/v1/targets", {"state": "active"})
        out: dict[str, str] = {}
        for target in (data or {}).get("activeTargets", []):
            labels = target.get("labels", {})
            if labels.get("job") == job and "instance" in labels and target.get("scrapeUrl"):
                out[labels["instance"]] = str(target["scrapeUrl"])
        return out

    async def aclose(self) -> None:
        await self._client.aclose()
