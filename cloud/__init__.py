"""The cloud GPU pool: a resilient client for OpenAI-compatible members and a member server."""

from .config import MemberSettings, PoolSettings
from .errors import CloudError

__all__ = ["CloudError", "MemberSettings", "PoolSettings"]
