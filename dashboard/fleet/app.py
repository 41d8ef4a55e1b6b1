"""The fleet dashboard's ASGI app: no node in the process, every figure from Prometheus."""

from __future__ import annotations

from litestar import Litestar, get
from litestar.datastructures import State
from litestar.response import Redirect

from models import EdgerouteError
from models.openai import exception_handlers as openai_exception_handlers
from router import ServerSettings

from ..auth import DashboardAuth
from ..plugin import operator_router
from .config import FleetSettings
from .prom import Prometheus, PrometheusUnavailableError
from .reader import FleetReader
from .routes import READER, TICK, FleetController


def create_fleet_app(settings: FleetSettings, server: ServerSettings | None = None) -> Litestar:
    """The fleet page at ``settings.path`` (``/`` redirects there), operator keys of ``server`` only."""
    server = server or ServerSettings()
    auth = DashboardAuth(server.key_table(), login_attempts_per_minute=server.login_attempts_per_minute)
    base = settings.path.rstrip("/")
    reader = FleetReader(Prometheus(str(settings.prometheus_url), timeout_s=settings.timeout_s), settings)
    # Prometheus unreachable: the JSON API's 503 in the OpenAI error shape the node's API uses.
    handlers = {PrometheusUnavailableError: openai_exception_handlers()[EdgerouteError]}
    fleet = operator_router(base, [FleetController], auth, name="fleet", handlers=handlers)

    @get("/", include_in_schema=False, sync_to_thread=False)
    def home() -> Redirect:
        return Redirect(base, status_code=303)

    return Litestar(
        route_handlers=[fleet, home],
        state=State({READER: reader, TICK: settings.tick_s}),
        on_shutdown=[reader.aclose],
        openapi_config=None,
        logging_config=None,
    )
