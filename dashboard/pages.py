"""The dashboard's pages and the fragments htmx fetches (request details, cache search/delete)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, MediaType, Request, Response, get, post
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, PermissionDeniedException, ValidationException
from litestar.params import Parameter

from router.telemetry import DashboardSettings

from .auth import PAGE
from .login import auth_of
from .panels import (
    REVIEW_LIMIT,
    Links,
    budget_html,
    cache_html,
    feed_rows_html,
    pool_html,
    review_html,
    search_html,
    stats_html,
)
from .render import render
from .views import FeedbackView, node_parts, resolve

Req = Request[Any, Any, State]


def links_of(request: Req) -> Links:
    return Links(base=request.route_handler.opt["dashboard_base"], logout=auth_of(request).enabled)


def dashboard_settings(request: Req) -> DashboardSettings:
    telemetry = node_parts(request.app.state).telemetry
    return telemetry.settings.dashboard if telemetry is not None else DashboardSettings()


def _html(body: str) -> Response[str]:
    return Response(body, media_type=MediaType.HTML)


def require_htmx(request: Req) -> None:
    """State-changing actions come from the dashboard's own htmx calls, never a cross-site form."""
    if request.headers.get("hx-request") != "true":
        raise PermissionDeniedException("dashboard actions must be sent by the dashboard (HX-Request header)")


def _page(request: Req, template: str, title: str, topics: str, **context: Any) -> Response[str]:
    """A full page: ``template`` (its name is the nav's page), the live topics it listens to."""
    page = template.removesuffix(".html")
    return _html(render(template, title=title, page=page, topics=topics, links=links_of(request), **context))


class DashboardController(Controller):
    path = "/"
    include_in_schema = False

    @get("/", name="dashboard:overview", opt={PAGE: True})
    async def overview(self, request: Req) -> Response[str]:
        telemetry = node_parts(request.app.state).telemetry
        events = telemetry.recent(8) if telemetry is not None else []
        stats = stats_html(telemetry)
        return _page(request, "overview.html", "Overview", "stats,feed", stats_html=stats, events=events)

    @get("/feed", name="dashboard:feed", opt={PAGE: True})
    async def feed(self, request: Req) -> Response[str]:
        telemetry = node_parts(request.app.state).telemetry
        rows = dashboard_settings(request).feed_rows
        events = telemetry.recent(rows) if telemetry is not None else []
        return _page(request, "feed.html", "Live feed", "feed", events=events, max_rows=rows)

    @get("/pool", name="dashboard:pool", opt={PAGE: True})
    async def pool(self, request: Req) -> Response[str]:
        pool = await pool_html(node_parts(request.app.state))
        return _page(request, "pool.html", "Pool", "pool", pool_html=pool)

    @get("/cache", name="dashboard:cache", opt={PAGE: True})
    async def cache(self, request: Req, q: str = "", tenant: str = "") -> Response[str]:
        parts = node_parts(request.app.state)
        links = links_of(request)
        return _page(
            request,
            "cache.html",
            "Cache",
            "cache",
            cache_html=await cache_html(parts),
            cache_configured=parts.cache is not None,
            # Listed once searched: a page opened without a search shows how to search instead.
            results_html=await search_html(parts.cache, links, q, tenant, listed=bool(q or tenant)),
            review_html=await review_html(parts.cache, links),
            budget_html=await budget_html(parts.cache),
            query=q,
            tenant=tenant,
        )

    @get("/requests/{request_id:str}", name="dashboard:request")
    async def request_details(self, request: Req, request_id: str) -> Response[str]:
        telemetry = node_parts(request.app.state).telemetry
        event = await telemetry.find(request_id) if telemetry is not None else None
        return _html(render("_details.html", event=event, request_id=request_id))

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
        return _html(await search_html(cache, links_of(request), q, tenant))

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
        queue = await resolve(cache.review_queue(None, REVIEW_LIMIT))
        row = next((r for r in queue if r["id"] == response_id), None)
        shown = row if row is not None else {**record, "stored_question": None, "answer": None}
        return _html(render("_cache_review_row.html", r=shown, base=links_of(request).base))
