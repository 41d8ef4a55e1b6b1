"""The login form: trade an operator key for the dashboard's session cookie (see auth.py)."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, get, post
from litestar.datastructures import State
from litestar.response import Redirect

from .auth import COOKIE, PUBLIC, DashboardAuth, safe_next, same_site
from .render import render

Req = Request[Any, Any, State]

AUTH_OPT = "dashboard_auth"
WRONG_KEY = "That key is not one of this node's API keys."
TENANT_KEY = (
    "That is a tenant key. The dashboard shows every tenant's traffic, so it takes an operator key "
    "(server.operator_keys)."
)
NO_OPERATORS = "This node has no operator keys (server.operator_keys): the dashboard is closed."


def auth_of(request: Req) -> DashboardAuth:
    """The check of the router the request came through (``operator_router`` puts it there)."""
    auth: DashboardAuth = request.route_handler.opt[AUTH_OPT]
    return auth


def _base(request: Req) -> str:
    return str(request.route_handler.opt["dashboard_base"])


def _form(
    base: str, target: str, error: str | None, status: int, headers: dict[str, str] | None = None
) -> Response[str]:
    html = render("login.html", base=base, static=f"{base}/static", next=target, error=error)
    # No cache: a shared cache must not keep a page that says whether a key was refused.
    return Response(
        html,
        status_code=status,
        media_type=MediaType.HTML,
        headers={"cache-control": "no-store", **(headers or {})},
    )


@get("/login", name="dashboard:login", opt={PUBLIC: True})
async def login_form(request: Req, next: str = "") -> Response[Any]:
    auth, base = auth_of(request), _base(request)
    target = safe_next(next, base)
    if await auth.allows(request):
        return Redirect(target, status_code=303)
    return _form(base, target, None if auth.keys.operators else NO_OPERATORS, 200)


# same_site: another site's page must neither log a browser in (login CSRF) nor out.
@post("/login", name="dashboard:login-submit", opt={PUBLIC: True}, guards=[same_site], status_code=303)
async def login_submit(request: Req) -> Response[Any]:
    auth, base = auth_of(request), _base(request)
    form = await request.form()
    target = safe_next(str(form.get("next") or ""), base)
    if not auth.enabled:
        return Redirect(target, status_code=303)
    # Counted before the key is looked at: past the limit, not even a right key gets in.
    wait = auth.login_attempts.attempt(request.client.host if request.client else "")
    if wait:
        message = f"Too many login attempts from your address. Try again in {wait} s."
        return _form(base, target, message, 429, {"retry-after": str(wait)})
    who = auth.keys.lookup(str(form.get("key") or "").strip())
    if who is None:
        return _form(base, target, WRONG_KEY, 401)
    if not who.operator:
        return _form(base, target, TENANT_KEY, 403)
    # 303: the browser follows with a GET, and a reload does not post the key again.
    return Redirect(
        target, status_code=303, cookies=[await auth.cookie(who, secure=request.url.scheme == "https")]
    )


@post("/logout", name="dashboard:logout", opt={PUBLIC: True}, guards=[same_site], status_code=303)
async def logout(request: Req) -> Response[Any]:
    auth, base = auth_of(request), _base(request)
    cookie = request.cookies.get(COOKIE)
    if cookie:
        await auth.close_session(cookie)  # the session ends here, not just in this browser
    response: Response[Any] = Redirect(f"{base}/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
