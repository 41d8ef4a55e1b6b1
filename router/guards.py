"""The guards every API's controller runs before a handler: the request's id and the API key
(:func:`api_guard`), and the tenant's request rate (:func:`rate_guard`)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from models.openai import api_key_guard

from .node import Node
from .record import RequestRecord

# A client's own request id is kept when it looks like one (it goes into logs and upstream headers).
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
REQUEST_ID_HEADER = "x-request-id"
# The OpenAPI security scheme of /v1 (defined on the app: router.app.BEARER_SCHEME).
BEARER = "bearer"


async def rate_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The tenant's requests per minute, before the body is parsed: a refusal (429) costs the
    node as little as it can, and the tenant is known from its key.

    Also puts the request's :class:`~router.record.RequestRecord` on its state (the error handler
    reads the route and the ``x-ratelimit-*`` headers from there).
    """
    record = connection.state.record = RequestRecord()
    node: Node = connection.app.state.node
    if node.limiter is not None:
        record.ratelimit.update(node.limiter.admit_request(connection.state.get("tenant", "default")))


async def api_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """The request's id, then its API key (:func:`models.openai.api_key_guard`), as one guard:
    Litestar copies the route handler for every guard it runs, on every request.

    The id is given before anything can fail (errors carry it too): the client's ``x-request-id``
    when it sent a sane one, else a new one.
    """
    given = connection.headers.get(REQUEST_ID_HEADER)
    connection.state.request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    await api_key_guard(connection, handler)
