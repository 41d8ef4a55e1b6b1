"""Telemetry of every routing decision: SQLite log, live event bus, Prometheus metrics."""

from .aggregate import Snapshot
from .bus import Subscription
from .config import DashboardSettings, TelemetrySettings
from .errors import SubscriptionClosedError
from .events import ROUTES, DecisionEvent
from .facade import Telemetry
from .gcwatch import GcWatch
from .http import metrics_handler, telemetry_of
from .sources import EdgeLoadView, PoolView
from .store import read_decisions

__all__ = [
    "ROUTES",
    "DashboardSettings",
    "DecisionEvent",
    "EdgeLoadView",
    "GcWatch",
    "PoolView",
    "Snapshot",
    "Subscription",
    "SubscriptionClosedError",
    "Telemetry",
    "TelemetrySettings",
    "metrics_handler",
    "read_decisions",
    "telemetry_of",
]
