"""The login form: trade an API key for the dashboard's session cookie (see auth.py)."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, get, post
from litestar.datastructures import State
from litestar.response import Redirect

from .auth import PUBLIC, DashboardAuth, safe_next
from .render import render

Req = Request[Any, Any, State]

AUTH_OPT = "dashboard_auth"
WRONG_KEY = "That key is not one of this node's API keys."


def auth_of(request: Req) -> DashboardAuth:
    auth = request.route_handler.opt.get(AUTH_OPT)
    return auth if isinstance(auth, DashboardAuth) else DashboardAuth()


def _base(request: Req) -> str:
    return str(request.route_handler.opt["dashboard_base"])


def _form(base: str, target: str, error: str | None, status: int) -> Response[str]:
    html = render("login.html", base=base, static=f"{base}/static", next=target, error=error)
    # No cache: a shared cache must not keep a page that says whether a key was refused.
    headers = {"cache-control": "no-store"}
    return Response(html, status_code=status, media_type=MediaType.HTML, headers=headers)


@get("/login", name="dashboard:login", opt={PUBLIC: True})
async def login_form(request: Req, next: str = "") -> Response[Any]:
    auth, base = auth_of(request), _base(request)
    target = safe_next(next, base)
    if not auth.enabled or auth.allows(request):
        return Redirect(target, status_code=303)
    return _form(base, target, None, 200)


@post("/login", name="dashboard:login-submit", opt={PUBLIC: True}, status_code=303)
async def login_submit(request: Req) -> Response[Any]:
    auth, base = auth_of(request), _base(request)
    form = await request.form()
    target = safe_next(str(form.get("next") or ""), base)
    if not auth.enabled:
        return Redirect(target, status_code=303)
    key = str(form.get("key") or "").strip()
    if not auth.valid_key(key):
        return _form(base, target, WRONG_KEY, 401)
    # 303: the browser follows with a GET, and a reload does not post the key again.
    return Redirect(target, status_code=303, cookies=[auth.cookie(key, secure=request.url.scheme == "https")])


@post("/logout", name="dashboard:logout", opt={PUBLIC: True}, status_code=303)
async def logout(request: Req) -> Response[Any]:
    auth, base = auth_of(request), _base(request)
    response: Response[Any] = Redirect(f"{base}/login", status_code=303)
    response.delete_cookie(auth.cookie_name, path="/")
    return response
