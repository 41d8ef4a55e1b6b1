"""The project's one base error, and the errors of the model registry."""

from __future__ import annotations


class EdgerouteError(Exception):
    """Base of every error edgeroute raises on purpose.

    ``param`` names the request field at fault (OpenAI's ``error.param``) and ``code`` is a
    short machine-readable code (OpenAI's ``error.code``).
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        # Response headers the HTTP layer adds to the error (e.g. where a request was routed).
        self.headers: dict[str, str] = {}


class ModelError(EdgerouteError):
    """A model artifact is missing, corrupt or unknown."""


class UnknownModelError(ModelError):
    """The alias names no model in the registry."""


class ChecksumMismatchError(ModelError):
    """A model file's sha256 is not the one recorded for it."""
