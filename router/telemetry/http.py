"""``GET /metrics``: the Prometheus scrape endpoint."""

from __future__ import annotations

import functools
from importlib import metadata
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State

from .facade import Telemetry
from .metrics import CONTENT_TYPE
from .sources import BudgetView, NodeInfo


def telemetry_of(state: State) -> Telemetry | None:
    """The node's telemetry (``app.state.node.telemetry``), or None when it has none."""
    node = getattr(state, "node", None)
    telemetry = getattr(node, "telemetry", None)
    return telemetry if isinstance(telemetry, Telemetry) else None


@functools.cache
def _version() -> str:
    try:
        return metadata.version("edgeroute")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return ""


def node_info(state: State) -> NodeInfo | None:
    """Who this node is, from its settings and engine; None for an app with no node."""
    node = getattr(state, "node", None)
    settings = getattr(node, "settings", None)
    if settings is None:
        return None
    spec = getattr(getattr(node, "edge", None), "spec", None)
    dashboard = settings.telemetry.dashboard
    drain = getattr(state, "drain", None)
    return NodeInfo(
        name=settings.server.node_name,
        edge_model=getattr(spec, "alias", ""),
        edge_model_version=str(getattr(spec, "sha256", ""))[:12],
        version=_version(),
        dashboard_path=dashboard.path if dashboard.enabled else "",
        draining=bool(getattr(drain, "draining", False)),
    )


@get("/metrics", summary="Prometheus metrics", tags=["ops"], include_in_schema=False, sync_to_thread=False)
def metrics_handler(request: Request[Any, Any, State]) -> Response[bytes]:
    """Counters and histograms of every decision, plus live edge-queue, pool and node gauges."""
    node = getattr(request.app.state, "node", None)
    telemetry = telemetry_of(request.app.state)
    body = b""
    if telemetry is not None:
        cache = getattr(node, "cache", None)
        body = telemetry.metrics.render(
            edge=getattr(node, "edge", None), pool=getattr(node, "pool", None), node=node_info(request.app.state),
            budget=cache if isinstance(cache, BudgetView) else None,
        )
    return Response(body, media_type=CONTENT_TYPE)
