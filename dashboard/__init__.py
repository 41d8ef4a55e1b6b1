"""The operator's dashboard: Litestar pages, htmx + SSE live updates, server-rendered SVG charts."""

from router.telemetry import MemberStatusLike, PoolView

from .auth import DashboardAuth
from .plugin import DashboardPlugin, dashboard_router, metrics_router
from .views import CacheEntryLike, CacheView

__all__ = [
    "CacheEntryLike",
    "CacheView",
    "DashboardAuth",
    "DashboardPlugin",
    "MemberStatusLike",
    "PoolView",
    "dashboard_router",
    "metrics_router",
]
