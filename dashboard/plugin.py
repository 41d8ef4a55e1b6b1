"""Mounting the dashboard (and ``GET /metrics``) on the node's Litestar app."""

from __future__ import annotations

import logging
from pathlib import Path

from litestar import Router
from litestar.config.app import AppConfig
from litestar.datastructures import CacheControlHeader, ResponseHeader
from litestar.plugins import InitPlugin
from litestar.static_files import create_static_files_router
from litestar.types import ControllerRouterHandler, ExceptionHandlersMap

from router import ServerSettings
from router.telemetry import TelemetrySettings, metrics_handler

from .auth import PUBLIC, DashboardAuth, exception_handlers
from .live import events
from .login import AUTH_OPT, login_form, login_submit, logout
from .pages import DashboardController

log = logging.getLogger(__name__)

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


def operator_router(
    path: str,
    route_handlers: list[ControllerRouterHandler],
    auth: DashboardAuth,
    *,
    name: str,
    handlers: ExceptionHandlersMap | None = None,
) -> Router:
    """``route_handlers`` at ``path`` for operators only, with the login form, the static files
    (``<name>-static``) and the security headers: the node's dashboard and the fleet page."""
    static = create_static_files_router(
        path="/static",
        directories=[STATIC],
        name=f"{name}-static",
        cache_control=CacheControlHeader(max_age=3600),
        include_in_schema=False,
        # Vendored scripts and styles hold nothing secret, and the login page needs its CSS.
        opt={PUBLIC: True},
    )
    return Router(
        path=path,
        route_handlers=[*route_handlers, static, login_form, login_submit, logout],
        guards=[auth.guard],
        exception_handlers={**exception_handlers(), **(handlers or {})},
        opt={"dashboard_base": path.rstrip("/"), AUTH_OPT: auth},
        response_headers=SECURITY_HEADERS,
        include_in_schema=False,
    )


class DashboardPlugin(InitPlugin):
    """Adds ``GET /metrics`` and, when enabled, the dashboard (both for operators only, auth.py)
    to the app being built: ``Litestar(..., plugins=[DashboardPlugin(settings.telemetry, server=settings.server)])``."""

    __slots__ = ("auth", "settings")

    def __init__(
        self, settings: TelemetrySettings | None = None, *, server: ServerSettings | None = None
    ) -> None:
        self.settings = settings or TelemetrySettings()
        server = server or ServerSettings()
        self.auth = DashboardAuth(
            server.key_table(), login_attempts_per_minute=server.login_attempts_per_minute
        )

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        if self.auth.enabled and not self.auth.keys.operators:
            log.warning("no operator key (server.operator_keys): the dashboard and /metrics refuse every key")
        # ``GET /metrics``, for operators like the dashboard (scrapers send an operator bearer key).
        metrics = Router(
            path="/",
            route_handlers=[metrics_handler],
            guards=[self.auth.guard],
            exception_handlers=exception_handlers(),
            include_in_schema=False,
        )
        app_config.route_handlers.append(metrics)
        if self.settings.dashboard.enabled:
            dashboard = operator_router(
                self.settings.dashboard.path, [DashboardController, events], self.auth, name="dashboard"
            )
            app_config.route_handlers.append(dashboard)
        return app_config
