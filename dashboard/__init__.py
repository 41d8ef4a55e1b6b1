"""The operator's dashboard: Litestar pages, htmx + SSE live updates, server-rendered SVG charts."""

from .plugin import DashboardPlugin

__all__ = ["DashboardPlugin"]
