"""Typed settings of the routing policy."""

from __future__ import annotations

from pydantic import BaseModel


class RoutingSettings(BaseModel):
    """Which policy decides edge or cloud, and its knobs."""

    policy: str = "hybrid"
