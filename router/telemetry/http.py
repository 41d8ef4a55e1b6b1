"""``GET /metrics``: the Prometheus scrape endpoint."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State

from .facade import Telemetry
from .metrics import CONTENT_TYPE
from .sources import BudgetView


def telemetry_of(state: State) -> Telemetry | None:
    """The node's telemetry (``app.state.node.telemetry``), or None when it has none."""
    node = getattr(state, "node", None)
    telemetry = getattr(node, "telemetry", None)
    return telemetry if isinstance(telemetry, Telemetry) else None


@get("/metrics", summary="Prometheus metrics", tags=["ops"], include_in_schema=False, sync_to_thread=False)
def metrics_handler(request: Request[Any, Any, State]) -> Response[bytes]:
    """Counters and histograms of every decision, plus live edge-queue and pool gauges."""
    node = getattr(request.app.state, "node", None)
    telemetry = telemetry_of(request.app.state)
    body = b""
    if telemetry is not None:
        cache = getattr(node, "cache", None)
        body = telemetry.render_metrics(
            edge=getattr(node, "edge", None), pool=getattr(node, "pool", None),
            budget=cache if isinstance(cache, BudgetView) else None,
        )
    return Response(body, media_type=CONTENT_TYPE)
