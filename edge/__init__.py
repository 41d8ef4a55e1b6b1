"""What runs on the box: the llama.cpp INT4 engine, the embedder and the SQLite-vector cache."""

from .cache import SKIPPED as CACHE_SKIPPED
from .cache import CacheHit, CacheKey, EdgeCache, embedding_text
from .config import CacheSettings, EdgeSettings
from .cpus import physical_cores
from .embedder import Embedder
from .engine import LlamaEngine, Prepared
from .errors import (
    CacheError,
    EdgeSaturatedError,
    EmbedderError,
    LogitBiasError,
    PromptTooLongError,
    ResponseFormatError,
    VerifierError,
)

__all__ = [
    "CACHE_SKIPPED",
    "CacheError",
    "CacheHit",
    "CacheKey",
    "CacheSettings",
    "EdgeCache",
    "EdgeSaturatedError",
    "EdgeSettings",
    "EmbedderError",
    "Embedder",
    "LlamaEngine",
    "Prepared",
    "LogitBiasError",
    "PromptTooLongError",
    "ResponseFormatError",
    "VerifierError",
    "embedding_text",
    "physical_cores",
]
