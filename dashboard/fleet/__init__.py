"""The fleet dashboard: many nodes and their pool on one page, read from Prometheus."""

from .app import create_fleet_app
from .config import FleetSettings
from .errors import FleetError, PrometheusUnavailableError
from .queries import FleetQueries
from .view import FleetView, MemberRow, NodeRow

__all__ = [
    "FleetError",
    "FleetQueries",
    "FleetSettings",
    "FleetView",
    "MemberRow",
    "NodeRow",
    "PrometheusUnavailableError",
    "create_fleet_app",
]
