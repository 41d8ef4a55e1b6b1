"""The operator's dashboard: Litestar pages, htmx + SSE live updates, server-rendered SVG charts."""

from .plugin import DashboardPlugin, dashboard_router
from .views import CacheEntryLike, CacheView, MemberStatusLike, PoolView

__all__ = [
    "CacheEntryLike",
    "CacheView",
    "DashboardPlugin",
    "MemberStatusLike",
    "PoolView",
    "dashboard_router",
]
