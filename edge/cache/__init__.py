"""The edge's SQLite-vector cache: exact and semantic answers, guarded, verified, per tenant."""

from .judged import Judged, Pair, load_judged, load_pairs, split_judged, split_pairs
from .keys import CacheKey, embedding_text
from .service import SKIPPED, CacheHit, EdgeCache
from .verifier import Verifier

__all__ = [
    "SKIPPED",
    "CacheHit",
    "CacheKey",
    "EdgeCache",
    "Judged",
    "Pair",
    "Verifier",
    "embedding_text",
    "load_judged",
    "load_pairs",
    "split_judged",
    "split_pairs",
]
