"""Who may see the dashboard and ``/metrics``: the node's operators, never a tenant.

The dashboard shows every tenant's prompts, answers and cache entries, so it is operator-only:
a request passes when it carries an operator key (``server.operator_keys``) as
``Authorization: Bearer <key>`` (Prometheus, curl) or the session cookie the login form gives
for one. A tenant key (``server.api_keys``) is refused with 403 everywhere here, whichever
tenant's data the page or fragment holds; no key or a wrong one is a 401 (pages: the login
form). With no keys configured at all nothing is checked (the node then binds only to
loopback unless told otherwise).

The cookie never holds the key: it is ``<expiry>.<session id>.<HMAC-SHA256>`` of the expiry
and a random session id, keyed by the operator's key digest and a secret drawn when the process
starts. So it expires on its own; logging out revokes its session id until that expiry; a
restart ends every session (the secret is new, so no revocation need outlive the process); and
removing a key from the settings ends the sessions made with it. It is HttpOnly (page scripts
cannot read it) and SameSite=Strict (no other site can make the browser send it), and browsers
send it with ``EventSource``, which cannot set headers. The login and logout forms refuse a POST
whose ``Origin`` (or ``Referer``) is another site's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import MediaType, Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Redirect
from litestar.types import ExceptionHandlersMap, Guard

from models.keys import KeyTable, Principal
from models.openai import bearer_token

from models.attempts import AttemptLimiter

COOKIE = "edgeroute_dashboard"
SESSION_TTL_S = 12 * 3600
# Drawn once per process: sessions end with it (see the module docstring).
_PROCESS_SECRET = secrets.token_bytes(32)
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


class DashboardAuthError(NotAuthorizedException):
    """No valid key on a request that needs one: 401 with an OpenAI-style error body."""


class LoginRequired(DashboardAuthError):
    """A browser asked for a page without a key: redirect it to the login form."""

    def __init__(self, login_url: str) -> None:
        super().__init__(MESSAGE)
        self.login_url = login_url


class OperatorRequired(PermissionDeniedException):
    """A valid tenant key where only an operator's will do: 403 with an OpenAI-style error body."""


class CrossSiteRequest(PermissionDeniedException):
    """A login or logout POST sent from another site's page: 403."""


class DashboardAuth:
    """The operator check shared by the dashboard's routes, ``/metrics`` and the login form."""

    __slots__ = ("_revoked", "cookie_name", "keys", "login_attempts", "ttl_s")

    def __init__(
        self,
        keys: KeyTable | None = None,
        *,
        login_attempts_per_minute: int = 10,
        ttl_s: int = SESSION_TTL_S,
        cookie_name: str = COOKIE,
    ) -> None:
        self.keys = keys or KeyTable()
        self.login_attempts = AttemptLimiter(login_attempts_per_minute, 60.0)
        self.ttl_s = ttl_s
        self.cookie_name = cookie_name
        # Session id -> its expiry: logged out, refused until then (forgotten after).
        self._revoked: dict[str, int] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> DashboardAuth:
        # Litestar deep-copies a router (and the ``opt`` holding this) when it registers it: the
        # login form, the logout and the guards must still share one revoked set.
        return self

    @property
    def enabled(self) -> bool:
        return self.keys.enabled

    @staticmethod
    def _mac(digest: bytes, expires: int, sid: str) -> str:
        key = _PROCESS_SECRET + digest
        return hmac.new(key, f"edgeroute-dashboard:{expires}:{sid}".encode(), hashlib.sha256).hexdigest()

    def session_value(self, operator: Principal, now: float | None = None) -> str:
        """A new session's cookie value for an operator, good for ``ttl_s`` from ``now``."""
        if not operator.operator:
            raise ValueError("only an operator gets a dashboard session")
        expires = int((time.time() if now is None else now) + self.ttl_s)
        sid = secrets.token_hex(16)
        return f"{expires}.{sid}.{self._mac(operator.digest, expires, sid)}"

    def valid_session(self, value: str, now: float | None = None) -> Principal | None:
        """The operator whose session ``value`` is, while it has not expired nor been revoked; else None."""
        expires_text, _, rest = value.partition(".")
        sid, _, mac = rest.partition(".")
        if not (expires_text.isascii() and expires_text.isdigit()) or not sid or not mac:
            return None
        expires = int(expires_text)
        if expires <= (time.time() if now is None else now) or sid in self._revoked:
            return None
        found: Principal | None = None
        for operator in self.keys.operators:
            # No early exit: the time taken does not tell which operator's session it was.
            if hmac.compare_digest(mac, self._mac(operator.digest, expires, sid)):
                found = operator
        return found

    def revoke(self, value: str, now: float | None = None) -> bool:
        """End the session ``value`` (logout): refused from now on. False when it was not a valid one."""
        now = time.time() if now is None else now
        if self.valid_session(value, now) is None:
            return False  # only a real session takes room here
        self._revoked = {sid: t for sid, t in self._revoked.items() if t > now}
        expires_text, _, rest = value.partition(".")
        self._revoked[rest.partition(".")[0]] = int(expires_text)
        return True

    def principal(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Principal | None:
        """Who the request is: its bearer key's principal, else its session's operator, else None."""
        if "authorization" in connection.headers:
            # A header decides alone: a wrong bearer key is not rescued by a cookie.
            token = bearer_token(connection)
            return self.keys.lookup(token) if token else None
        cookie = connection.cookies.get(self.cookie_name)
        return self.valid_session(cookie) if cookie else None

    def allows(self, connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
        """True when no key is configured, or the request is an operator's."""
        if not self.keys.enabled:
            return True
        who = self.principal(connection)
        return who is not None and who.operator

    async def guard(self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        """Litestar guard; async so Litestar does not hop to a worker thread for it."""
        if handler.opt.get(PUBLIC) or not self.keys.enabled:
            return
        who = self.principal(connection)
        if who is not None:
            if who.operator:
                return
            raise OperatorRequired(OPERATOR_ONLY)
        # Guards see websockets too (the dashboard has none); only an HTTP GET is a page load.
        method = connection.method if isinstance(connection, Request) else None
        is_navigation = method == "GET" and "hx-request" not in connection.headers
        if handler.opt.get(PAGE) and is_navigation:
            raise LoginRequired(login_url(handler.opt.get("dashboard_base", ""), connection))
        raise DashboardAuthError(MESSAGE)

    def guards(self) -> list[Guard]:
        """The guards to put on a layer: none at all when no key is configured."""
        return [self.guard] if self.keys.enabled else []

    def cookie(self, operator: Principal, *, secure: bool) -> Cookie:
        return Cookie(
            key=self.cookie_name,
            value=self.session_value(operator),
            # "/" so the same login also opens /metrics in the browser; /v1 ignores cookies.
            path="/",
            max_age=self.ttl_s,
            httponly=True,
            samesite="strict",
            secure=secure,
        )


def same_site(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether a form POST came from a page of this node: its ``Origin`` (else ``Referer``) names
    the host the request was sent to. Neither header (curl, a script): nothing to judge, True.
    Only the host and port are compared: a TLS proxy in front makes the schemes differ."""
    source = connection.headers.get("origin") or connection.headers.get("referer")
    if not source:
        return True
    if source == "null":  # a sandboxed or privacy-sensitive context: not this node's page
        return False
    host = connection.headers.get("host", "")
    return bool(host) and urlsplit(source).netloc.lower() == host.lower()


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


def _operator_required(_: Request[Any, Any, Any], exc: OperatorRequired) -> Response[Any]:
    error = {"message": exc.detail, "type": "permission_error", "param": None, "code": "operator_key_required"}
    return Response({"error": error}, status_code=403, media_type=MediaType.JSON)


def _cross_site(_: Request[Any, Any, Any], exc: CrossSiteRequest) -> Response[Any]:
    error = {"message": exc.detail, "type": "permission_error", "param": None, "code": "cross_site_request"}
    return Response({"error": error}, status_code=403, media_type=MediaType.JSON)


def _to_login(_: Request[Any, Any, Any], exc: LoginRequired) -> Response[Any]:
    return Redirect(exc.login_url, status_code=303)


def exception_handlers() -> ExceptionHandlersMap:
    """For the guarded layers, so the answer does not depend on the app's own error handlers."""
    return {
        DashboardAuthError: _unauthorized,
        LoginRequired: _to_login,
        OperatorRequired: _operator_required,
        CrossSiteRequest: _cross_site,
    }
