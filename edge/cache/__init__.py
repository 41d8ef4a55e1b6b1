"""The edge's SQLite-vector cache: exact and semantic answers, guarded, verified, per tenant."""

from .calibration import sweep
from .guards import check as guard_check
from .judged import Judged, Pair, load_judged, load_pairs, split_judged, split_pairs
from .keys import CacheKey, embedding_text
from .service import SKIPPED, CacheHit, EdgeCache, Lookup
from .verifier import Verifier
from .warmup import read_warmup

__all__ = [
    "SKIPPED",
    "CacheHit",
    "CacheKey",
    "EdgeCache",
    "Judged",
    "Lookup",
    "Pair",
    "Verifier",
    "embedding_text",
    "guard_check",
    "load_judged",
    "load_pairs",
    "read_warmup",
    "split_judged",
    "split_pairs",
    "sweep",
]
