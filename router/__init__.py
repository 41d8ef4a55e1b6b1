"""The front door and the brain: the OpenAI-compatible API, routing, fallback, telemetry."""

from .app import create_app
from .errors import AuthenticationError, ConfigError, InvalidRequestError, NoCapacityError, RouterError
from .node import Node, RequestContext
from .settings import Settings, load_settings

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "InvalidRequestError",
    "Node",
    "NoCapacityError",
    "RequestContext",
    "RouterError",
    "Settings",
    "create_app",
    "load_settings",
]
