"""The front door and the brain: the OpenAI-compatible API, routing, fallback, telemetry."""

from .app import create_api_app
from .errors import AuthenticationError, ConfigError, InvalidRequestError, NoCapacityError, RouterError
from .node import Node
from .record import RequestContext
from .settings import ServerSettings, Settings, is_loopback, load_settings

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "InvalidRequestError",
    "Node",
    "NoCapacityError",
    "RequestContext",
    "RouterError",
    "ServerSettings",
    "Settings",
    "create_api_app",
    "is_loopback",
    "load_settings",
]
