"""Typed settings of the cloud pool (the router composes them into the node's settings)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MemberSettings(BaseModel):
    """One OpenAI-compatible pool member."""

    name: str
    base_url: str = Field(description="e.g. http://10.0.0.5:8000/v1")
    api_key: str | None = None
    model: str = Field(description="model name the member serves")
    weight: float = Field(1.0, gt=0)


class PoolSettings(BaseModel):
    """The cloud GPU pool."""

    members: list[MemberSettings] = Field(default_factory=list)
    local_member: bool = Field(True, description="start one local member when none is configured")
