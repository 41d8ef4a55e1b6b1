"""Errors of the fleet dashboard."""

from __future__ import annotations

from models import EdgerouteError


class FleetError(EdgerouteError):
    """Base of the fleet dashboard's errors."""


class PrometheusUnavailableError(FleetError):
    """Prometheus did not answer, or answered something that is not a query result (503)."""

    status = 503
