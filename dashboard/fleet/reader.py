"""One round of queries to Prometheus, shared by every open page and API call."""

from __future__ import annotations

import asyncio
import time

from .config import FleetSettings
from .prom import Prometheus, PrometheusUnavailableError
from .queries import member_queries, node_queries
from .view import FleetView, build_members, build_nodes


class FleetReader:
    """The fleet's view, read from Prometheus at most once every ``max_age_s``.

    The fleet page never talks to a node: everything comes from Prometheus, which scrapes each
    node once per scrape interval whatever the number of open pages.
    """

    def __init__(self, prometheus: Prometheus, settings: FleetSettings) -> None:
        self.prometheus = prometheus
        self.settings = settings
        self._lock = asyncio.Lock()
        self._last: tuple[float, FleetView] | None = None

    async def view(self) -> FleetView:
        """The latest view; with Prometheus unreachable, one whose ``error`` says why."""
        async with self._lock:
            now = time.monotonic()
            if self._last is not None and now - self._last[0] <= self.settings.max_age_s:
                return self._last[1]
            try:
                view = await self._read()
            except PrometheusUnavailableError as exc:
                view = FleetView(at=time.time(), error=str(exc))
            self._last = (time.monotonic(), view)
            return view

    async def _read(self) -> FleetView:
        nodes, members = node_queries(self.settings), member_queries(self.settings)
        *vectors, urls = await asyncio.gather(
            *(self.prometheus.query(q) for q in [*nodes.values(), *members.values()]),
            self.prometheus.scrape_urls(self.settings.nodes_job),
        )
        node_results = dict(zip(nodes, vectors[: len(nodes)], strict=True))
        member_results = dict(zip(members, vectors[len(nodes) :], strict=True))
        return FleetView(
            at=time.time(), nodes=build_nodes(node_results, urls), members=build_members(member_results)  # type: ignore[arg-type]
        )

    async def aclose(self) -> None:
        await self.prometheus.aclose()
