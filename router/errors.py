"""Errors of the router (request validation, settings, routing); categories: :mod:`models.errors`."""

from __future__ import annotations

from models.errors import AuthenticationError, EdgerouteError, EngineUnavailableError, RequestRejectedError

__all__ = ["AuthenticationError", "ConfigError", "InvalidRequestError", "NoCapacityError", "RouterError"]


class RouterError(EdgerouteError):
    """Base of the router's errors."""


class ConfigError(RouterError, RequestRejectedError):
    """The settings are invalid or the config file is missing or malformed."""


class InvalidRequestError(RouterError, RequestRejectedError):
    """The request body is malformed or a field is out of range."""


class NoCapacityError(RouterError, EngineUnavailableError):
    """Neither the edge nor the cloud can take the request now."""

    def __init__(self, message: str, *, retry_after: int = 1, code: str | None = "no_capacity") -> None:
        super().__init__(message, retry_after=retry_after, code=code)
