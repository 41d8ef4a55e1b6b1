"""Telemetry of every routing decision: SQLite log, live event bus, Prometheus metrics."""

from .aggregate import Snapshot
from .bus import EventBus, Subscription
from .config import DashboardSettings, PriceSettings, TelemetrySettings
from .errors import InvalidEventError, SubscriptionClosedError, TelemetryError
from .events import ROUTES, DecisionEvent
from .facade import Telemetry
from .gcwatch import GcWatch
from .http import metrics_handler, telemetry_of
from .sources import EdgeLoadView, MemberStatusLike, NodeInfo, PoolView
from .store import read_decisions

__all__ = [
    "ROUTES",
    "DashboardSettings",
    "DecisionEvent",
    "EdgeLoadView",
    "EventBus",
    "GcWatch",
    "InvalidEventError",
    "MemberStatusLike",
    "NodeInfo",
    "PoolView",
    "PriceSettings",
    "Snapshot",
    "Subscription",
    "SubscriptionClosedError",
    "Telemetry",
    "TelemetryError",
    "TelemetrySettings",
    "metrics_handler",
    "read_decisions",
    "telemetry_of",
]
