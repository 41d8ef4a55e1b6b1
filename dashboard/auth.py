"""Who may see the dashboard and ``/metrics``: the node's API keys, as a bearer header or a cookie.

With no keys configured nothing is checked (the node binds to 127.0.0.1 by default). With keys,
a request passes when it carries ``Authorization: Bearer <key>`` (Prometheus, curl) or the
session cookie the login form sets. The cookie never holds the key itself: it is
``<expiry>.<HMAC-SHA256(key, expiry)>``, so it expires on its own, and removing a key from the
settings ends every session made with it at the next restart. It is HttpOnly (page scripts
cannot read it) and SameSite=Strict (no other site can make the browser send it), and browsers
send it with ``EventSource``, which cannot set headers.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Collection
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import MediaType, Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Redirect
from litestar.types import ExceptionHandlersMap, Guard

COOKIE = "edgeroute_dashboard"
SESSION_TTL_S = 12 * 3600
# Route-handler ``opt`` flags: reachable without a key (login, static files), and a full page
# (a browser that asks for one without a key is sent to the login form rather than given a 401).
PUBLIC = "dashboard_public"
PAGE = "dashboard_page"
# The same words /v1 answers with, so clients see one kind of auth error from the node.
MESSAGE = "invalid or missing API key"


class DashboardAuthError(NotAuthorizedException):
    """No valid key on a request that needs one: 401 with an OpenAI-style error body."""


class LoginRequired(DashboardAuthError):
    """A browser asked for a page without a key: redirect it to the login form."""

    def __init__(self, login_url: str) -> None:
        super().__init__(MESSAGE)
        self.login_url = login_url


class DashboardAuth:
    """The key check shared by the dashboard's routes, ``/metrics`` and the login form."""

    __slots__ = ("_keys", "cookie_name", "ttl_s")

    def __init__(
        self, keys: Collection[str] = (), *, ttl_s: int = SESSION_TTL_S, cookie_name: str = COOKIE
    ) -> None:
        # Only the keys matter here; a mapping (key -> tenant) gives its keys.
        self._keys = tuple(k.encode() for k in keys if k)
        self.ttl_s = ttl_s
        self.cookie_name = cookie_name

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def valid_key(self, key: str) -> bool:
        candidate = key.encode()
        found = False
        for known in self._keys:
            # No early exit: the time taken does not tell how much of a key matched, or which.
            found |= hmac.compare_digest(candidate, known)
        return found

    @staticmethod
    def _mac(key: bytes, expires: int) -> str:
        return hmac.new(key, f"edgeroute-dashboard:{expires}".encode(), hashlib.sha256).hexdigest()

    def session_value(self, key: str, now: float | None = None) -> str:
        """The cookie value for a valid ``key``, good for ``ttl_s`` from ``now``."""
        expires = int((time.time() if now is None else now) + self.ttl_s)
        return f"{expires}.{self._mac(key.encode(), expires)}"

    def valid_session(self, value: str, now: float | None = None) -> bool:
        expires_text, _, mac = value.partition(".")
        if not expires_text.isdigit() or not mac:
            return False
        expires = int(expires_text)
        if expires <= (time.time() if now is None else now):
            return False
        found = False
        for known in self._keys:
            found |= hmac.compare_digest(mac, self._mac(known, expires))
        return found

    def allows(self, connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
        """True when no key is configured, or the request carries a valid one."""
        if not self._keys:
            return True
        header = connection.headers.get("authorization")
        if header is not None:
            # A header decides alone: a wrong bearer key is not rescued by a cookie.
            scheme, _, token = header.partition(" ")
            return scheme.lower() == "bearer" and self.valid_key(token.strip())
        cookie = connection.cookies.get(self.cookie_name)
        return cookie is not None and self.valid_session(cookie)

    async def guard(self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        """Litestar guard; async so Litestar does not hop to a worker thread for it."""
        if handler.opt.get(PUBLIC) or self.allows(connection):
            return
        # Guards see websockets too (the dashboard has none); only an HTTP GET is a page load.
        method = connection.method if isinstance(connection, Request) else None
        is_navigation = method == "GET" and "hx-request" not in connection.headers
        if handler.opt.get(PAGE) and is_navigation:
            raise LoginRequired(login_url(handler.opt.get("dashboard_base", ""), connection))
        raise DashboardAuthError(MESSAGE)

    def guards(self) -> list[Guard]:
        """The guards to put on a layer: none at all when no key is configured."""
        return [self.guard] if self._keys else []

    def cookie(self, key: str, *, secure: bool) -> Cookie:
        return Cookie(
            key=self.cookie_name,
            value=self.session_value(key),
            # "/" so the same login also opens /metrics in the browser; /v1 ignores cookies.
            path="/",
            max_age=self.ttl_s,
            httponly=True,
            samesite="strict",
            secure=secure,
        )


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


def unauthorized_body(message: str = MESSAGE) -> dict[str, Any]:
    error = {"message": message, "type": "authentication_error", "param": None, "code": "invalid_api_key"}
    return {"error": error}


def _unauthorized(_: Request[Any, Any, Any], exc: DashboardAuthError) -> Response[Any]:
    return Response(
        unauthorized_body(),
        status_code=401,
        media_type=MediaType.JSON,
        headers={"www-authenticate": 'Bearer realm="edgeroute"'},
    )


def _to_login(_: Request[Any, Any, Any], exc: LoginRequired) -> Response[Any]:
    return Redirect(exc.login_url, status_code=303)


def exception_handlers() -> ExceptionHandlersMap:
    """For the guarded layers, so the answer does not depend on the app's own error handlers."""
    return {DashboardAuthError: _unauthorized, LoginRequired: _to_login}
