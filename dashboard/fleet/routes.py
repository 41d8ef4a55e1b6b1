"""The fleet's page, its live stream and its JSON."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, MediaType, Request, Response, get
from litestar.datastructures import State
from litestar.response import ServerSentEvent, ServerSentEventMessage

from router.telemetry import ROUTES

from ..auth import PAGE
from ..charts import share_bar
from ..live import SSE_HEADERS
from ..pages import links_of
from ..render import render
from .prom import PrometheusUnavailableError
from .reader import FleetReader
from .view import FleetView, MemberRow, NodeRow

Req = Request[Any, Any, State]
READER = "fleet_reader"
TICK = "fleet_tick_s"
NAV = [("fleet", "Fleet", "/")]


def reader_of(request: Req) -> FleetReader:
    reader: FleetReader = request.app.state[READER]
    return reader


async def read_or_503(request: Req) -> FleetView:
    """The fleet's view for the JSON API, which has no page to show Prometheus's error on: a 503."""
    view = await reader_of(request).view()
    if view.error is not None:
        raise PrometheusUnavailableError(view.error)
    return view


def nodes_html(view: FleetView) -> str:
    return render(
        "_fleet_nodes.html",
        view=view,
        routes=ROUTES,
        share=share_bar(view.routes),
        node_shares={
            n.instance: share_bar({r: round(c) for r, c in n.routes.items()}, width=1000) for n in view.nodes
        },
    )


def members_html(view: FleetView) -> str:
    return render("_fleet_members.html", view=view)


async def fleet_stream(request: Req) -> AsyncIterator[ServerSentEventMessage]:
    reader = reader_of(request)
    tick_s: float = request.app.state[TICK]
    yield ServerSentEventMessage(comment="edgeroute fleet")
    while True:
        view = await reader.view()
        yield ServerSentEventMessage(data=nodes_html(view), event="nodes")
        yield ServerSentEventMessage(data=members_html(view), event="members")
        await asyncio.sleep(tick_s)


class FleetController(Controller):
    path = "/"
    include_in_schema = False

    @get("/", name="fleet:overview", opt={PAGE: True})
    async def overview(self, request: Req) -> Response[str]:
        view = await reader_of(request).view()
        links = links_of(request)
        html = render(
            "fleet.html",
            title="Fleet",
            page="fleet",
            topics="nodes,members",
            nav=NAV,
            links=links,
            prometheus=reader_of(request).prometheus.base_url,
            nodes_html=nodes_html(view),
            members_html=members_html(view),
        )
        return Response(html, media_type=MediaType.HTML)

    @get("/events", name="fleet:events")
    async def events(self, request: Req) -> ServerSentEvent:
        """The nodes and members panels, re-rendered every ``tick_s`` from Prometheus."""
        return ServerSentEvent(fleet_stream(request), headers=SSE_HEADERS)

    @get("/api/nodes", name="fleet:api-nodes", media_type=MediaType.JSON)
    async def api_nodes(self, request: Req) -> list[NodeRow]:
        """Every node Prometheus scrapes, with its health and figures over the window."""
        return (await read_or_503(request)).nodes

    @get("/api/members", name="fleet:api-members", media_type=MediaType.JSON)
    async def api_members(self, request: Req) -> list[MemberRow]:
        """Every vLLM pool member Prometheus scrapes, with its load."""
        return (await read_or_503(request)).members
