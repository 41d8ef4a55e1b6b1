"""Errors of telemetry (the decision log, the live bus)."""

from __future__ import annotations

from models.errors import EdgerouteError


class TelemetryError(EdgerouteError):
    """Base of telemetry's errors: the decision log cannot be opened, read or migrated."""


class InvalidEventError(TelemetryError):
    """A decision event has a route, status or field outside the contract."""


class SubscriptionClosedError(TelemetryError):
    """The live event bus was closed; the subscriber should stop."""
