"""Errors of the cloud pool."""

from __future__ import annotations

from models.errors import EdgerouteError


class CloudError(EdgerouteError):
    """Base of the cloud pool's errors."""
