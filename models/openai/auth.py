"""The API-key guard of every OpenAI-compatible server here (the node and the member)."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from ..attempts import AttemptLimiter
from ..errors import AuthenticationError, TooManyAttemptsError
from ..keys import KeyTable

# The app's state key holding the :class:`models.keys.KeyTable`; an empty one: no key is required.
API_KEYS = "api_keys"
# The app's state key holding an :class:`models.attempts.AttemptLimiter` of wrong keys per client
# address (absent: not limited).
KEY_FAILURES = "key_failures"
TENANT_HEADER = "x-edgeroute-tenant"
DEFAULT_TENANT = "default"


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The key of ``Authorization: Bearer <key>``, or None without one."""
    auth = connection.headers.get("authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else None


async def api_key_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Check the bearer key before the body is read, and put the tenant on ``connection.state``.

    A tenant key's requests are its tenant's, whatever they send. An operator key acts for every
    tenant: it names the one a request is for in ``x-edgeroute-tenant``, as every request does
    on a node with no keys configured. ``connection.state.operator`` says which it was.
    Async on purpose: Litestar runs a sync guard in a worker thread, a hop on every request.
    """
    keys: KeyTable | None = connection.app.state.get(API_KEYS)
    if keys is None or not keys.enabled:
        connection.state.tenant = connection.headers.get(TENANT_HEADER) or DEFAULT_TENANT
        connection.state.operator = True
        return
    failures: AttemptLimiter | None = connection.app.state.get(KEY_FAILURES)
    client = connection.client.host if connection.client else ""
    if failures is not None:
        wait = failures.wait_s(client)
        if wait:  # refused without looking at the key: guessing gets no faster than the limit
            raise TooManyAttemptsError(
                f"too many requests with a wrong API key from your address; try again in {wait}s",
                retry_after=wait,
            )
    token = bearer_token(connection)
    principal = keys.lookup(token) if token else None
    if principal is None:
        if failures is not None:
            failures.attempt(client)
        raise AuthenticationError("invalid or missing API key", code="invalid_api_key")
    connection.state.operator = principal.operator
    if principal.operator:
        connection.state.tenant = connection.headers.get(TENANT_HEADER) or DEFAULT_TENANT
    else:
        connection.state.tenant = principal.tenant
