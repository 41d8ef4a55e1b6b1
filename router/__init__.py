"""The front door and the brain: the OpenAI-compatible API, routing, fallback, telemetry."""

from .app import create_api_app
from .settings import ServerSettings, Settings, is_loopback, load_settings

__all__ = [
    "ServerSettings",
    "Settings",
    "create_api_app",
    "is_loopback",
    "load_settings",
]
