"""Typed settings of telemetry and the dashboard."""

from __future__ import annotations

from pydantic import BaseModel


class TelemetrySettings(BaseModel):
    """Telemetry log and the dashboard's cost estimate."""

    enabled: bool = True
