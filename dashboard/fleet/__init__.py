"""The fleet dashboard: many nodes and their pool on one page, read from Prometheus."""

from .app import create_fleet_app
from .config import FleetSettings

__all__ = ["FleetSettings", "create_fleet_app"]
