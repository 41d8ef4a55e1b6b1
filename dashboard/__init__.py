"""The operator's dashboard: Litestar pages, htmx + SSE live updates, server-rendered SVG charts."""

from .auth import DashboardAuth
from .plugin import DashboardPlugin

__all__ = ["DashboardAuth", "DashboardPlugin"]
