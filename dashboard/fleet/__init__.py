"""The fleet dashboard: many nodes and their pool on one page, read from Prometheus."""

from .app import create_fleet_app
from .config import FleetSettings
from .prom import PrometheusUnavailableError

__all__ = ["FleetSettings", "PrometheusUnavailableError", "create_fleet_app"]
