"""The operator's dashboard: Litestar pages, htmx + SSE live updates, server-rendered SVG charts."""

from router.telemetry import PoolView

from .auth import DashboardAuth
from .plugin import DashboardPlugin
from .views import CacheView

__all__ = ["CacheView", "DashboardAuth", "DashboardPlugin", "PoolView"]
