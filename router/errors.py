"""Errors of the router (request validation, auth, routing)."""

from __future__ import annotations

from models.errors import EdgerouteError


class RouterError(EdgerouteError):
    """Base of the router's errors."""


class ConfigError(RouterError):
    """The settings are invalid or the config file is missing or malformed."""


class InvalidRequestError(RouterError):
    """The request body is malformed or a field is out of range."""


class AuthenticationError(RouterError):
    """Missing or wrong API key."""


class NoCapacityError(RouterError):
    """Neither the edge nor the cloud can take the request now."""

    def __init__(self, message: str, *, retry_after: int = 1, code: str | None = "no_capacity") -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after
