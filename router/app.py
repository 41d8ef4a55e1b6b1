"""The application factory: resources built in the lifespan, errors mapped to HTTP once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, MediaType, Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from cloud import CloudRequestError, PoolUnavailableError
from edge import (
    EdgeSaturatedError,
    EngineClosedError,
    EngineLoadError,
    GenerationError,
    PromptTooLongError,
)
from models import EdgerouteError, UnknownModelError

from .api import OpenAIController, healthz
from .errors import AuthenticationError, ConfigError, InvalidRequestError, NoCapacityError
from .node import open_node
from .openai_format import error_body
from .settings import Settings

log = logging.getLogger(__name__)

# One table from error class to (status, OpenAI error type); the first match wins.
_STATUS: tuple[tuple[type[EdgerouteError], int, str], ...] = (
    (AuthenticationError, 401, "authentication_error"),
    (InvalidRequestError, 400, "invalid_request_error"),
    (PromptTooLongError, 400, "invalid_request_error"),
    (UnknownModelError, 404, "invalid_request_error"),
    (ConfigError, 400, "invalid_request_error"),
    (EdgeSaturatedError, 503, "server_overloaded"),
    (NoCapacityError, 503, "server_overloaded"),
    (EngineClosedError, 503, "server_error"),
    (PoolUnavailableError, 503, "server_overloaded"),
    (CloudRequestError, 400, "invalid_request_error"),
    (EngineLoadError, 500, "server_error"),
    (GenerationError, 500, "server_error"),
)


def _status_of(exc: EdgerouteError) -> tuple[int, str]:
    for cls, status, err_type in _STATUS:
        if isinstance(exc, cls):
            if status == 400 and exc.code == "model_not_found":
                return 404, err_type
            return status, err_type
    return 500, "server_error"


def _route_headers(request: Request[Any, Any, Any], reason: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """On the API, an error is a route too: ``x-edgeroute-route: error`` and a short reason."""
    headers = dict(extra or {})
    if request.url.path.startswith("/v1/"):
        headers.setdefault("x-edgeroute-route", "error")
        headers.setdefault("x-edgeroute-reason", reason.replace("_", "-"))
    return headers


def _edgeroute_error(request: Request[Any, Any, Any], exc: EdgerouteError) -> Response[Any]:
    status, err_type = _status_of(exc)
    headers = _route_headers(request, exc.code or err_type, exc.headers)
    if status == 503:
        headers["retry-after"] = str(getattr(exc, "retry_after", 1))
    return Response(error_body(exc.message, err_type, exc.param, exc.code), status_code=status, headers=headers)


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "function-after", "constrained-str"}


def _param(key: str | None) -> str | None:
    """A pydantic location as the field path a client wrote (drop union-member tags like ``list[str]``)."""
    if not key:
        return None
    parts = [p for p in key.split(".") if p.lower() not in _TYPE_TAGS and "[" not in p and "-" not in p]
    return ".".join(parts) or None


def _validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    details = exc.extra if isinstance(exc.extra, list) else []
    param = None
    parts = []
    for item in details:
        if isinstance(item, dict):
            key = _param(item.get("key"))
            param = param or key
            parts.append(f"{key}: {item.get('message')}" if key else str(item.get("message")))
    message = "; ".join(parts) or exc.detail
    return Response(
        error_body(message, "invalid_request_error", param, "invalid_request"),
        status_code=400,
        headers=_route_headers(request, "invalid_request"),
    )


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    err_type = "invalid_request_error" if status < 500 else "server_error"
    detail = exc.detail
    reason = f"http-{status}"
    if isinstance(exc.__cause__, SerializationException):
        detail = f"the body is not valid JSON: {detail}"
        reason = "invalid-json"
    headers = _route_headers(request, reason, dict(exc.headers or {}))
    return Response(error_body(detail, err_type, None, None), status_code=status, headers=headers)


def _not_utf8(request: Request[Any, Any, Any], exc: UnicodeDecodeError) -> Response[Any]:
    message = f"the body is not valid UTF-8 (byte {exc.start}: {exc.reason})"
    return Response(
        error_body(message, "invalid_request_error", None, "invalid_encoding"),
        status_code=400,
        headers=_route_headers(request, "invalid_encoding"),
    )


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error", exc_info=exc)
    return Response(
        error_body("internal error", "server_error", None, None),
        status_code=HTTP_500_INTERNAL_SERVER_ERROR,
        media_type=MediaType.JSON,
        headers=_route_headers(request, "internal_error"),
    )


def create_app(settings: Settings) -> Litestar:
    """Build the node's ASGI app; the engine is loaded when the app starts, closed when it stops."""
    # The factory is the one place that knows the dashboard (it depends on router.telemetry).
    from dashboard import DashboardPlugin

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_node(settings) as node:
            app.state.node = node
            yield

    return Litestar(
        route_handlers=[OpenAIController, healthz],
        plugins=[DashboardPlugin(settings.telemetry, api_keys=settings.server.api_keys)],
        lifespan=[lifespan],
        exception_handlers={
            EdgerouteError: _edgeroute_error,
            ValidationException: _validation_error,
            HTTPException: _http_error,
            UnicodeDecodeError: _not_utf8,
            Exception: _unexpected,
        },
        openapi_config=OpenAPIConfig(title="edgeroute", version="0.1.0", path="/openapi"),
        request_max_body_size=settings.server.max_body_bytes,
    )
