"""The dashboard's pages and the fragments htmx fetches (request details, cache search/delete)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, MediaType, Request, Response, get, post
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, PermissionDeniedException, ValidationException
from litestar.params import Parameter

from router.telemetry import DashboardSettings

from .auth import PAGE, DashboardAuth
from .login import AUTH_OPT
from .panels import (
    REVIEW_LIMIT,
    Links,
    budget_html,
    cache_html,
    cache_results_html,
    details_html,
    feed_rows_html,
    pool_html,
    review_html,
    review_row_html,
    stats_html,
)
from .render import render
from .views import EntryRow, FeedbackView, node_parts, resolve

SEARCH_LIMIT = 50

Req = Request[Any, Any, State]


def links_of(request: Req) -> Links:
    opt = request.route_handler.opt
    auth = opt.get(AUTH_OPT)
    return Links(base=opt["dashboard_base"], logout=isinstance(auth, DashboardAuth) and auth.enabled)


def dashboard_settings(request: Req) -> DashboardSettings:
    telemetry = node_parts(request.app.state).telemetry
    return telemetry.settings.dashboard if telemetry is not None else DashboardSettings()


def _html(body: str) -> Response[str]:
    return Response(body, media_type=MediaType.HTML)


def require_htmx(request: Req) -> None:
    """State-changing actions come from the dashboard's own htmx calls, never a cross-site form."""
    if request.headers.get("hx-request") != "true":
        raise PermissionDeniedException("dashboard actions must be sent by the dashboard (HX-Request header)")


class DashboardController(Controller):
    path = "/"
    include_in_schema = False

    @get("/", name="dashboard:overview", opt={PAGE: True})
    async def overview(self, request: Req) -> Response[str]:
        parts = node_parts(request.app.state)
        links = links_of(request)
        events = parts.telemetry.recent(8) if parts.telemetry is not None else []
        return _html(
            render(
                "overview.html",
                title="Overview",
                page="overview",
                topics="stats,feed",
                links=links,
                stats_html=stats_html(parts.telemetry, links),
                events=events,
            )
        )

    @get("/feed", name="dashboard:feed", opt={PAGE: True})
    async def feed(self, request: Req) -> Response[str]:
        parts = node_parts(request.app.state)
        rows = dashboard_settings(request).feed_rows
        events = parts.telemetry.recent(rows) if parts.telemetry is not None else []
        links = links_of(request)
        return _html(
            render(
                "feed.html",
                title="Live feed",
                page="feed",
                topics="feed",
                links=links,
                events=events,
                max_rows=rows,
            )
        )

    @get("/pool", name="dashboard:pool", opt={PAGE: True})
    async def pool(self, request: Req) -> Response[str]:
        parts = node_parts(request.app.state)
        return _html(
            render(
                "pool.html",
                title="Pool",
                page="pool",
                topics="pool",
                links=links_of(request),
                pool_html=await pool_html(parts),
            )
        )

    @get("/cache", name="dashboard:cache", opt={PAGE: True})
    async def cache(self, request: Req, q: str = "", tenant: str = "") -> Response[str]:
        parts = node_parts(request.app.state)
        links = links_of(request)
        entries = None
        if parts.cache is not None and (q or tenant):
            found = await resolve(parts.cache.search(q, tenant or None, SEARCH_LIMIT))
            entries = [EntryRow.of(e) for e in found]
        return _html(
            render(
                "cache.html",
                title="Cache",
                page="cache",
                topics="cache",
                links=links,
                cache_html=await cache_html(parts),
                cache_configured=parts.cache is not None,
                results_html=cache_results_html(entries, links, query=q, tenant=tenant),
                review_html=await review_html(parts.cache, links),
                budget_html=await budget_html(parts.cache),
                query=q,
                tenant=tenant,
            )
        )

    @get("/requests/{request_id:str}", name="dashboard:request")
    async def request_details(self, request: Req, request_id: str) -> Response[str]:
        telemetry = node_parts(request.app.state).telemetry
        event = await telemetry.find(request_id) if telemetry is not None else None
        return _html(details_html(event, request_id))

    @get("/feed/rows", name="dashboard:feed-rows")
    async def feed_rows(
        self, request: Req, limit: int = Parameter(default=50, ge=1, le=5000)
    ) -> Response[str]:
        telemetry = node_parts(request.app.state).telemetry
        events = telemetry.recent(limit) if telemetry is not None else []
        return _html(feed_rows_html(events, links_of(request)))

    @get("/cache/search", name="dashboard:cache-search")
    async def cache_search(self, request: Req, q: str = "", tenant: str = "") -> Response[str]:
        cache = node_parts(request.app.state).cache
        links = links_of(request)
        if cache is None:
            return _html(cache_results_html(None, links, message="The cache is not configured on this node."))
        found = await resolve(cache.search(q, tenant or None, SEARCH_LIMIT))
        return _html(cache_results_html([EntryRow.of(e) for e in found], links, query=q, tenant=tenant))

    @post("/cache/entries/{entry_id:int}/delete", name="dashboard:cache-delete", status_code=200)
    async def cache_delete(self, request: Req, entry_id: int) -> Response[str]:
        require_htmx(request)
        cache = node_parts(request.app.state).cache
        deleted = bool(await resolve(cache.delete(entry_id))) if cache is not None else False
        return _html(render("_entry_deleted.html", entry_id=entry_id, deleted=deleted))

    @post("/cache/review/{response_id:str}/{rating:str}", name="dashboard:cache-review", status_code=200)
    async def cache_review(self, request: Req, response_id: str, rating: str) -> Response[str]:
        """One click of the review queue: the operator rates a served hit right or wrong."""
        require_htmx(request)
        if rating not in ("right", "wrong"):
            raise ValidationException(f"rating must be right or wrong, not {rating!r}")
        cache = node_parts(request.app.state).cache
        if not isinstance(cache, FeedbackView):
            raise NotFoundException("this node keeps no ratings")
        record = await resolve(cache.rate(response_id, None, rating, None, "operator"))
        if record is None:
            raise NotFoundException(f"no served answer {response_id!r}")
        row = next((r for r in await resolve(cache.review_queue(None, REVIEW_LIMIT)) if r["id"] == response_id), None)
        shown = row if row is not None else {**record, "stored_question": None, "answer": None}
        return _html(review_row_html(shown, links_of(request).base))
