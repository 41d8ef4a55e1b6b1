"""The edge's SQLite-vector cache: exact and semantic answers, guarded, verified, per tenant."""

from .calibration import Calibration, sweep
from .guards import REASONS as GUARD_REASONS
from .guards import check as guard_check
from .judged import Judged, Pair, load_judged, load_pairs, split_judged, split_pairs
from .keys import CacheKey, embedding_text, exact_key, semantic_parts
from .service import SKIPPED, TIERS, CacheHit, Candidate, EdgeCache, Lookup
from .verifier import Verifier
from .warmup import WarmItem, read_warmup

__all__ = [
    "GUARD_REASONS",
    "SKIPPED",
    "TIERS",
    "CacheHit",
    "CacheKey",
    "Calibration",
    "Candidate",
    "EdgeCache",
    "Judged",
    "Lookup",
    "Pair",
    "Verifier",
    "WarmItem",
    "embedding_text",
    "exact_key",
    "guard_check",
    "load_judged",
    "load_pairs",
    "read_warmup",
    "semantic_parts",
    "split_judged",
    "split_pairs",
    "sweep",
]
