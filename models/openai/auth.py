"""The API-key guard of every OpenAI-compatible server here (the node and the member)."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from ..errors import AuthenticationError

# The app's state key holding ``{api key: tenant}``; empty: no key is required.
API_KEYS = "api_keys"
TENANT_HEADER = "x-edgeroute-tenant"


async def api_key_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Check the bearer key before the body is read, and put the tenant on ``connection.state``.

    With no keys configured every request passes and names its tenant in ``x-edgeroute-tenant``.
    Async on purpose: Litestar runs a sync guard in a worker thread, a hop on every request.
    """
    keys: dict[str, str] = connection.app.state.get(API_KEYS) or {}
    if not keys:
        connection.state.tenant = connection.headers.get(TENANT_HEADER) or "default"
        return
    auth = connection.headers.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
    if token is None or token not in keys:
        raise AuthenticationError("invalid or missing API key", code="invalid_api_key")
    connection.state.tenant = keys[token]
