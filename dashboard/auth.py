"""Who may see the dashboard and ``/metrics``: the node's operators, never a tenant (every
tenant's prompts, answers and cache entries are on it; docs/dashboard.md says what each request
gets). An operator key passes as a bearer header or as the login form's session cookie: a random
session id, kept in a Litestar ``MemoryStore`` with the digest of the key it was opened with, for
``ttl_s`` from the login, so logging out, a restart or removing the key ends it.

Why not Litestar's session middleware and ``CSRFConfig``: the middleware answers every request
it covers with a ``Set-Cookie`` (a refused login or an anonymous 401 too, storing an empty
session for each), keeps a session id the browser brings rather than drawing a new one at
login, renews the expiry on every response, and fixes ``Secure`` for all requests where this
sets it from the request's scheme. ``CSRFConfig`` refuses any POST without its token (a login
from curl or a script) and never looks at ``Origin``. So only its store is used here.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import MediaType, Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import HTTPException
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Redirect
from litestar.stores.memory import MemoryStore
from litestar.types import ExceptionHandlersMap

from models.attempts import AttemptLimiter
from models.keys import KeyTable, Principal
from models.openai import bearer_token

COOKIE = "edgeroute_dashboard"
SESSION_TTL_S = 12 * 3600
# Route-handler ``opt`` flags: reachable without a key (login, static files), and a full page
# (a browser that asks for one without a key is sent to the login form rather than given a 401).
PUBLIC = "dashboard_public"
PAGE = "dashboard_page"
# The same words /v1 answers with, so clients see one kind of auth error from the node.
MESSAGE = "invalid or missing API key"
OPERATOR_ONLY = (
    "the dashboard and /metrics need an operator key (server.operator_keys); "
    "a tenant key reaches its own tenant's data through /v1 only"
)
CROSS_SITE = "this form is only accepted from the node's own pages (the Origin header names another site)"


class Refused(HTTPException):
    """A request the guards refuse: an OpenAI-style error body (``code`` is its ``error.code``), or
    with ``login_url`` (a browser loading a page without a key) a redirect to the login form."""

    def __init__(self, status: int, code: str, message: str, login_url: str | None = None) -> None:
        super().__init__(detail=message, status_code=status)
        self.kind = "authentication_error" if status == 401 else "permission_error"
        self.code = code
        self.login_url = login_url


class DashboardAuth:
    """The operator check shared by the dashboard's routes, ``/metrics`` and the login form."""

    __slots__ = ("keys", "login_attempts", "sessions", "ttl_s")

    def __init__(
        self,
        keys: KeyTable | None = None,
        *,
        login_attempts_per_minute: int = 10,
        ttl_s: int = SESSION_TTL_S,
    ) -> None:
        self.keys = keys or KeyTable()
        self.login_attempts = AttemptLimiter(login_attempts_per_minute, 60.0)
        self.ttl_s = ttl_s
        # Session id -> the digest of the operator key it was opened with, until it expires.
        self.sessions = MemoryStore()

    def __deepcopy__(self, memo: dict[int, Any]) -> DashboardAuth:
        # Litestar deep-copies a router (and the ``opt`` holding this) when it registers it: the
        # login form, the logout and the guards must still share one session store.
        return self

    @property
    def enabled(self) -> bool:
        return self.keys.enabled

    async def open_session(self, operator: Principal) -> str:
        """A new session for an operator, good for ``ttl_s``: the cookie's value."""
        if not operator.operator:
            raise ValueError("only an operator gets a dashboard session")
        await self.sessions.delete_expired()  # logins are rare: the store is tidied here
        sid = secrets.token_urlsafe(32)
        await self.sessions.set(sid, operator.digest, expires_in=self.ttl_s)
        return sid

    async def session(self, sid: str) -> Principal | None:
        """The operator whose session ``sid`` is, while it lasts and their key is configured; else None."""
        digest = await self.sessions.get(sid)
        return next((op for op in self.keys.operators if op.digest == digest), None)

    async def close_session(self, sid: str) -> None:
        """Logout: the session ends on the node, for every copy of the cookie."""
        await self.sessions.delete(sid)

    async def principal(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Principal | None:
        """Who the request is: its bearer key's principal, else its session's operator, else None."""
        if "authorization" in connection.headers:
            # A header decides alone: a wrong bearer key is not rescued by a cookie.
            token = bearer_token(connection)
            return self.keys.lookup(token) if token else None
        cookie = connection.cookies.get(COOKIE)
        return await self.session(cookie) if cookie else None

    async def allows(self, connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
        """True when no key is configured, or the request is an operator's."""
        if not self.keys.enabled:
            return True
        who = await self.principal(connection)
        return who is not None and who.operator

    async def guard(self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        """Litestar guard; async so Litestar does not hop to a worker thread for it."""
        if handler.opt.get(PUBLIC) or not self.keys.enabled:
            return
        who = await self.principal(connection)
        if who is not None:
            if who.operator:
                return
            raise Refused(403, "operator_key_required", OPERATOR_ONLY)
        # Guards see websockets too (the dashboard has none); only an HTTP GET is a page load.
        method = connection.method if isinstance(connection, Request) else None
        page_load = handler.opt.get(PAGE) and method == "GET" and "hx-request" not in connection.headers
        login = login_url(handler.opt.get("dashboard_base", ""), connection) if page_load else None
        raise Refused(401, "invalid_api_key", MESSAGE, login)

    async def cookie(self, operator: Principal, *, secure: bool) -> Cookie:
        """A new session's cookie for an operator who just logged in."""
        return Cookie(
            key=COOKIE,
            value=await self.open_session(operator),
            # "/" so the same login also opens /metrics in the browser; /v1 ignores cookies.
            path="/",
            max_age=self.ttl_s,
            httponly=True,
            samesite="strict",
            secure=secure,
        )


async def same_site(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard of the login and logout forms (login CSRF): a POST must come from a page of this node,
    its ``Origin`` (else ``Referer``) naming the host the request was sent to. Neither header
    (curl, a script): nothing to judge, it passes. Only the host and port are compared: a TLS
    proxy in front makes the schemes differ."""
    source = connection.headers.get("origin") or connection.headers.get("referer")
    if not source:
        return
    host = connection.headers.get("host", "")
    # "null": a sandboxed or privacy-sensitive context, not this node's page.
    if source == "null" or not host or urlsplit(source).netloc.lower() != host.lower():
        raise Refused(403, "cross_site_request", CROSS_SITE)


def login_url(base: str, connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    target = connection.url.path + (f"?{connection.url.query}" if connection.url.query else "")
    return f"{base}/login?next={quote(target, safe='/')}"


def safe_next(target: str, base: str) -> str:
    """Where to go after logging in: a page of this dashboard, never another site."""
    parts = urlsplit(target)
    home = base or "/"
    if parts.scheme or parts.netloc or not target.startswith("/"):
        return home
    if target.startswith("//") or "\\" in target:  # browsers read both as another host
        return home
    if parts.path != home and not parts.path.startswith(f"{base}/"):
        return home
    return target


def _refused(_: Request[Any, Any, Any], exc: Refused) -> Response[Any]:
    if exc.login_url is not None:
        return Redirect(exc.login_url, status_code=303)
    error = {"message": exc.detail, "type": exc.kind, "param": None, "code": exc.code}
    headers = {"www-authenticate": 'Bearer realm="edgeroute"'} if exc.status_code == 401 else None
    return Response({"error": error}, status_code=exc.status_code, media_type=MediaType.JSON, headers=headers)


def exception_handlers() -> ExceptionHandlersMap:
    """For the guarded layers, so the answer does not depend on the app's own error handlers."""
    return {Refused: _refused}
