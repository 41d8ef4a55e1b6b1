"""The cloud GPU pool: a resilient client for OpenAI-compatible members and a member server."""

from __future__ import annotations

from models import register_step

from .client import Member
from .config import MemberServerSettings, MemberSettings, PoolSettings
from .errors import (
    CloudRequestError,
    LocalMemberError,
    MemberConnectError,
    MemberHTTPError,
    MemberProtocolError,
    MemberTimeoutError,
    PoolUnavailableError,
    StreamBrokenError,
)
from .events import MemberStatus, PoolEvent
from .local import LocalMember
from .member.launcher import native_bf16
from .pool import CloudPool, Started
from .runtime import open_pool
from .twin import prepare_twin

__all__ = [
    "CloudPool",
    "CloudRequestError",
    "LocalMember",
    "LocalMemberError",
    "Member",
    "MemberConnectError",
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
    "native_bf16",
    "open_pool",
    "register_prepare_steps",
    "Started",
]


def register_prepare_steps() -> None:
    """Add the cloud's step to `edgeroute models prepare`: build the local member's fp32 twin.

    Explicit (the caller runs it before :func:`models.prepare`) so importing ``cloud`` changes no
    global state; idempotent. torch is imported only when the step runs.
    """
    register_step(prepare_twin)
