"""Errors of the router (request validation, settings, routing); categories: :mod:`models.errors`."""

from __future__ import annotations

from models.errors import EdgerouteError, EngineUnavailableError, RequestRejectedError


class ConfigError(RequestRejectedError):
    """The settings are invalid or the config file is missing or malformed."""


class InvalidRequestError(RequestRejectedError):
    """The request body is malformed or a field is out of range."""


class NotFoundError(RequestRejectedError):
    """No stored response, or no answer to rate, has this id for this tenant (missing, expired,
    deleted or another's)."""

    status = 404


class StoreError(EdgerouteError):
    """The stored responses or the ratings cannot be read or written."""

    status = 503


class NoCapacityError(EngineUnavailableError):
    """Neither the edge nor the cloud can take the request now."""


class RateLimitedError(RequestRejectedError):
    """The tenant is over its per-minute limit (OpenAI's 429 ``rate_limit_exceeded``).

    ``error_type`` says which limit, as OpenAI does (``requests`` or ``tokens``); ``retry_after``
    is the seconds until the request would be admitted (the ``retry-after`` header).
    """

    status = 429

    def __init__(
        self,
        message: str,
        *,
        retry_after: int,
        code: str | None = "rate_limit_exceeded",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after
        self.headers = headers or {}  # the x-ratelimit-* state the client is told about


class RequestsRateLimitError(RateLimitedError):
    error_type = "requests"


class TokensRateLimitError(RateLimitedError):
    error_type = "tokens"


class EdgeBusyError(RequestsRateLimitError):
    """The tenant already holds its fair share of the edge's queue (and no cloud took the
    request): a deliberate 429, ``retry-after`` the edge's expected wait, reason ``edge-saturated``."""


class PayloadTooLargeError(RequestRejectedError):
    """The body is over ``server.max_body_bytes``."""

    status = 413


class BodyTimeoutError(RequestRejectedError):
    """The client did not send its whole body within ``server.body_timeout_s``."""

    status = 408


class DrainingError(EngineUnavailableError):
    """The node is shutting down: it takes no new request (503 with ``retry-after``)."""


class ClientGoneError(RequestRejectedError):
    """The client closed the connection before its (non-streamed) answer was ready; the generation
    was cancelled. Nobody reads the response (499, as proxies log it)."""

    status = 499
