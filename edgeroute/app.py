"""The node's whole ASGI app: the router's OpenAI-compatible API with the dashboard mounted on it
(assembled in the top layer: the dashboard knows the router, the router never the dashboard)."""

from __future__ import annotations

from litestar import Litestar

from dashboard import DashboardPlugin
from router import Settings, create_api_app


def create_app(settings: Settings) -> Litestar:
    """The API, the dashboard and ``GET /metrics`` on one app (what `edgeroute serve` runs)."""
    return create_api_app(settings, plugins=[DashboardPlugin(settings.telemetry, server=settings.server)])
