"""Typed settings of the edge (the router composes them into the node's settings)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from models import EDGE_DEFAULT


class EdgeSettings(BaseModel):
    """The llama.cpp engine on the box."""

    model: str = Field(EDGE_DEFAULT, description="registry alias of the edge GGUF model")
    n_ctx: int = Field(2048, ge=128, le=131072, description="context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="llama.cpp threads (default: all cores)")
    n_batch: int = Field(256, ge=8, description="prompt-processing batch size")
    max_queue: int = Field(32, ge=1, description="requests waiting beyond this bound are refused")
    default_max_tokens: int = Field(256, ge=1, description="max_tokens when a request gives none")


class CacheSettings(BaseModel):
    """The SQLite-vector cache (exact and semantic layers)."""

    enabled: bool = True
