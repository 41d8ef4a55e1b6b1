"""What runs on the box: the llama.cpp INT4 engine (and, later, the embedder and the cache)."""

from .config import CacheSettings, EdgeSettings
from .engine import LlamaEngine
from .errors import (
    EdgeError,
    EdgeSaturatedError,
    EngineClosedError,
    EngineLoadError,
    GenerationError,
    PromptTooLongError,
)

__all__ = [
    "CacheSettings",
    "EdgeError",
    "EdgeSaturatedError",
    "EdgeSettings",
    "EngineClosedError",
    "EngineLoadError",
    "GenerationError",
    "LlamaEngine",
    "PromptTooLongError",
]
