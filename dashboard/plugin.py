"""Mounting the dashboard (and ``GET /metrics``) on the node's Litestar app."""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.config.app import AppConfig
from litestar.datastructures import CacheControlHeader, ResponseHeader
from litestar.plugins import InitPlugin
from litestar.static_files import create_static_files_router
from litestar.types import Guard

from router.telemetry import TelemetrySettings, metrics_handler

from .live import events
from .pages import DashboardController

STATIC = Path(__file__).parent / "static"

# Every script and style comes from the dashboard's own static files: a prompt that smuggles
# markup into a page can neither run script nor load anything from elsewhere.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    ResponseHeader(name="content-security-policy", value=CSP),
    ResponseHeader(name="x-content-type-options", value="nosniff"),
    ResponseHeader(name="referrer-policy", value="same-origin"),
]


def dashboard_router(path: str = "/dashboard", *, guards: list[Guard] | None = None) -> Router:
    """The dashboard's pages, live stream and static files, mounted at ``path``."""
    static = create_static_files_router(
        path="/static",
        directories=[STATIC],
        name="dashboard-static",
        cache_control=CacheControlHeader(max_age=3600),
        include_in_schema=False,
    )
    return Router(
        path=path,
        route_handlers=[DashboardController, events, static],
        guards=guards or [],
        opt={"dashboard_base": path.rstrip("/")},
        response_headers=SECURITY_HEADERS,
        include_in_schema=False,
    )


class DashboardPlugin(InitPlugin):
    """Adds ``GET /metrics`` and, when enabled, the dashboard to the app being built.

    ``Litestar(..., plugins=[DashboardPlugin(settings.telemetry)])``; ``guards`` apply to the
    dashboard's routes (the node's auth, once it covers browsers).
    """

    __slots__ = ("guards", "settings")

    def __init__(
        self, settings: TelemetrySettings | None = None, *, guards: list[Guard] | None = None
    ) -> None:
        self.settings = settings or TelemetrySettings()
        self.guards = guards

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.route_handlers.append(metrics_handler)
        if self.settings.dashboard.enabled:
            app_config.route_handlers.append(
                dashboard_router(self.settings.dashboard.path, guards=self.guards)
            )
        return app_config
