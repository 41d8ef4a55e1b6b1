"""Errors of the fleet dashboard."""

from __future__ import annotations

from models import EdgerouteError


class FleetError(EdgerouteError):
    """Base of the fleet dashboard's errors."""


class PrometheusUnavailableError(FleetError):
    """Prometheus did not answer, or answered something that is not a query result (503)."""

    status = 503
    error_type = "service_unavailable"
    retry_after = 5  # seconds: the next round of queries may find it back

    def __init__(self, message: str) -> None:
        super().__init__(message, code="prometheus_unavailable")
