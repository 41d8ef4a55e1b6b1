"""The project's one base error, its categories, and the errors of the model registry.

Callers catch categories (:class:`RequestRejectedError`: no other target helps; :class:`EngineError`:
another may), never lists of concrete classes. Each class says how it reaches a client: ``status``
(HTTP) and ``error_type`` (OpenAI's ``error.type``); the servers map errors by these alone.
"""

from __future__ import annotations

from typing import ClassVar


class EdgerouteError(Exception):
    """Base of every error edgeroute raises on purpose.

    ``param`` names the request field at fault (OpenAI's ``error.param``) and ``code`` is a
    short machine-readable code (OpenAI's ``error.code``).
    """

    status: ClassVar[int] = 500
    error_type: ClassVar[str] = "server_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class RequestRejectedError(EdgerouteError):
    """The request cannot be served as sent (a bad field, a prompt too long, an unknown model)."""

    status = 400
    error_type = "invalid_request_error"


class AuthenticationError(RequestRejectedError):
    """Missing or wrong API key."""

    status = 401
    error_type = "authentication_error"


class TooManyAttemptsError(RequestRejectedError):
    """Too many wrong keys from one client address: 429 with ``retry_after`` (seconds)."""

    status = 429
    error_type = "requests"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, code="rate_limit_exceeded")
        self.retry_after = retry_after


class EngineError(EdgerouteError):
    """An engine could not answer this request; another target may."""


class EngineUnavailableError(EngineError):
    """The engine cannot take the request now (saturated, closing, no healthy member).

    ``retry_after`` is the client's hint in seconds (the ``retry-after`` header of a 503).
    """

    status = 503
    error_type = "server_overloaded"

    def __init__(self, message: str, *, retry_after: int = 1, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class StreamBrokenError(EngineError):
    """A stream broke after its first token; ``partial`` is the text received so far."""

    def __init__(self, message: str, *, partial: str = "", member: str | None = None) -> None:
        super().__init__(message, code="stream_broken")
        self.partial = partial
        self.member = member


class WireFormatError(EdgerouteError):
    """An OpenAI-compatible server's answer is not in OpenAI's shape (the pool's client turns it
    into a member failure)."""


class MalformedEventError(WireFormatError):
    """A stream event that is not an OpenAI chunk."""


class ErrorEventError(WireFormatError):
    """The server sent an error event inside the stream."""


class ModelError(EdgerouteError):
    """A model artifact is missing, corrupt or unknown."""


class UnknownModelError(ModelError, RequestRejectedError):
    """The alias names no model in the registry."""

    status = 404


class ChecksumMismatchError(ModelError):
    """A model file's sha256 is not the one recorded for it."""
