"""The cloud GPU pool: a resilient client for OpenAI-compatible members and a member server."""

from __future__ import annotations

from pathlib import Path

from models import register_step

from .client import Member
from .config import MemberServerSettings, MemberSettings, PoolSettings
from .errors import (
    CloudError,
    CloudRequestError,
    LocalMemberError,
    MemberConnectError,
    MemberError,
    MemberHTTPError,
    MemberProtocolError,
    MemberTimeoutError,
    PoolUnavailableError,
    StreamBrokenError,
)
from .events import MemberStatus, PoolEvent
from .local import LocalMember
from .pool import CloudPool
from .runtime import open_pool

__all__ = [
    "CloudError",
    "CloudPool",
    "CloudRequestError",
    "LocalMember",
    "LocalMemberError",
    "Member",
    "MemberConnectError",
    "MemberError",
    "MemberHTTPError",
    "MemberProtocolError",
    "MemberServerSettings",
    "MemberSettings",
    "MemberStatus",
    "MemberTimeoutError",
    "PoolEvent",
    "PoolSettings",
    "PoolUnavailableError",
    "StreamBrokenError",
    "open_pool",
]


def _prepare_twin(models_dir: Path, progress: bool) -> None:
    from .member.weights import prepare_twin

    prepare_twin(models_dir, progress)


# `edgeroute models prepare` also builds the local member's fp32 twin (torch is imported only then).
register_step(_prepare_twin)
