"""OpenAI error bodies, and errors to HTTP responses by their class attributes (one mapping for
every server here: the node's API and the member server)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException

from ..errors import EdgerouteError
from .stream import error_body

log = logging.getLogger(__name__)

# Headers a server adds to every error response of a request (the node: where it was routed).
ExtraHeaders = Callable[[Request[Any, Any, Any], str], dict[str, str]]
# Another API's error body for a request, from OpenAI's (the node's Ollama API: ``{"error": message}``).
Reshape = Callable[[Request[Any, Any, Any], dict[str, Any]], dict[str, Any]]


# What Litestar reports for a body that is not there at all: the handler's ``data`` argument
# missing, as a KeyError's text ("data: 'data'" told a client nothing).
_NO_BODY = {"key": "data", "message": "'data'", "source": "body"}
EMPTY_BODY = "the request body is empty; send a JSON object"

_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "function-after", "constrained-str"}


def field_path(key: str | None) -> str | None:
    """A pydantic location as the field path a client wrote (drop union-member tags like ``list[str]``)."""
    if not key:
        return None
    parts = [p for p in key.split(".") if p.lower() not in _TYPE_TAGS and "[" not in p and "-" not in p]
    return ".".join(parts) or None


def exception_handlers(
    extra_headers: ExtraHeaders | None = None, reshape: Reshape | None = None
) -> dict[type[Exception], Any]:
    """Litestar exception handlers that answer every error with an OpenAI error body (or what
    ``reshape`` makes of it for the request's API).

    ``extra_headers(request, reason)`` adds headers to each error response; ``reason`` is the
    error's code (or a short name of the failure).
    """

    def respond(
        request: Request[Any, Any, Any],
        status: int,
        body: dict[str, Any],
        reason: str,
        headers: dict[str, str] | None = None,
    ) -> Response[Any]:
        out = dict(headers or {})
        if extra_headers is not None:
            out.update(extra_headers(request, reason))
        if reshape is not None:
            body = reshape(request, body)
        return Response(body, status_code=status, headers=out, media_type=MediaType.JSON)

    def edgeroute_error(request: Request[Any, Any, Any], exc: EdgerouteError) -> Response[Any]:
        headers = {}
        # A 503 (engine unavailable, draining) and a 429 (rate limit) both tell when to retry.
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        headers.update(getattr(exc, "headers", None) or {})  # e.g. a 429's x-ratelimit-* headers
        body = error_body(exc.message, exc.error_type, exc.param, exc.code)
        # An unknown model is a 404 whichever layer found out (as OpenAI answers).
        status = 404 if exc.code == "model_not_found" else exc.status
        return respond(request, status, body, exc.code or exc.error_type, headers)

    def validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
        details = exc.extra if isinstance(exc.extra, list) else []
        if any(isinstance(item, dict) and item.items() >= _NO_BODY.items() for item in details):
            body = error_body(EMPTY_BODY, "invalid_request_error", None, "empty_body")
            return respond(request, 400, body, "empty_body")
        param = None
        parts = []
        for item in details:
            if isinstance(item, dict):
                key = field_path(item.get("key"))
                param = param or key
                # pydantic prefixes a validator's own message; the client needs only the message.
                text = str(item.get("message")).removeprefix("Value error, ")
                parts.append(f"{key}: {text}" if key else text)
        message = "; ".join(parts) or str(exc.detail)
        body = error_body(message, "invalid_request_error", param, "invalid_request")
        return respond(request, 400, body, "invalid_request")

    def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
        status = exc.status_code
        err_type = "invalid_request_error" if status < 500 else "server_error"
        detail = exc.detail
        reason = f"http-{status}"
        if isinstance(exc.__cause__, SerializationException):
            detail = f"the body is not valid JSON: {detail}"
            reason = "invalid-json"
        return respond(request, status, error_body(detail, err_type), reason, dict(exc.headers or {}))

    def not_utf8(request: Request[Any, Any, Any], exc: UnicodeDecodeError) -> Response[Any]:
        message = f"the body is not valid UTF-8 (byte {exc.start}: {exc.reason})"
        body = error_body(message, "invalid_request_error", None, "invalid_encoding")
        return respond(request, 400, body, "invalid_encoding")

    def unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
        log.exception("unhandled error", exc_info=exc)
        return respond(request, 500, error_body("internal error", "server_error"), "internal_error")

    return {
        EdgerouteError: edgeroute_error,
        ValidationException: validation_error,
        HTTPException: http_error,
        UnicodeDecodeError: not_utf8,
        Exception: unexpected,
    }
