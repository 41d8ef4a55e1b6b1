"""The fleet dashboard's ASGI app: no node in the process, every figure from Prometheus."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, MediaType, Request, Response, Router, get
from litestar.datastructures import CacheControlHeader, State
from litestar.response import Redirect
from litestar.static_files import create_static_files_router

from router import ServerSettings

from ..auth import PUBLIC, DashboardAuth, exception_handlers
from ..login import AUTH_OPT, login_form, login_submit, logout
from ..plugin import SECURITY_HEADERS, STATIC
from .config import FleetSettings
from .errors import PrometheusUnavailableError
from .prom import Prometheus
from .queries import FleetQueries
from .reader import FleetReader
from .routes import READER, TICK, FleetController


def _unavailable(_: Request[Any, Any, Any], exc: PrometheusUnavailableError) -> Response[Any]:
    error = {
        "message": str(exc),
        "type": "service_unavailable",
        "param": None,
        "code": "prometheus_unavailable",
    }
    return Response(
        {"error": error}, status_code=503, media_type=MediaType.JSON, headers={"retry-after": "5"}
    )


def create_fleet_app(settings: FleetSettings, server: ServerSettings | None = None) -> Litestar:
    """The fleet page at ``settings.path`` (``/`` redirects there), operator keys of ``server`` only."""
    server = server or ServerSettings()
    auth = DashboardAuth(server.key_table(), login_attempts_per_minute=server.login_attempts_per_minute)
    base = settings.path.rstrip("/")
    queries = FleetQueries(settings.nodes_job, settings.members_job, settings.window, settings.rate_window)
    reader = FleetReader(
        Prometheus(str(settings.prometheus_url), timeout_s=settings.timeout_s),
        queries,
        max_age_s=settings.max_age_s,
    )
    static = create_static_files_router(
        path="/static",
        directories=[STATIC],
        name="fleet-static",
        cache_control=CacheControlHeader(max_age=3600),
        include_in_schema=False,
        opt={PUBLIC: True},
    )
    fleet = Router(
        path=base,
        route_handlers=[FleetController, static, login_form, login_submit, logout],
        guards=auth.guards(),
        exception_handlers={**exception_handlers(), PrometheusUnavailableError: _unavailable},
        opt={"dashboard_base": base, AUTH_OPT: auth},
        response_headers=SECURITY_HEADERS,
        include_in_schema=False,
    )

    @get("/", include_in_schema=False, sync_to_thread=False)
    def home() -> Redirect:
        return Redirect(base, status_code=303)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await reader.aclose()

    return Litestar(
        route_handlers=[fleet, home],
        state=State({READER: reader, TICK: settings.tick_s}),
        lifespan=[lifespan],
        openapi_config=None,
        logging_config=None,
    )
