"""What a lookup finds: a hit, the lookup's outcome, a judged candidate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from models import Usage

from .store import Entry


@dataclass(frozen=True, slots=True)
class CacheHit:
    kind: Literal["exact", "semantic"]
    text: str
    finish_reason: str
    usage: Usage
    similarity: float  # 1.0 for exact
    tier: str  # who produced the answer: "edge", "cloud" (or "warmup")
    entry_id: int
    probability: float | None = None  # the verifier's, on a semantic hit it judged
    stop_word: str | None = None  # the stop sequence that ended the stored answer


@dataclass(frozen=True, slots=True)
class Lookup:
    hit: CacheHit | None
    embedding: np.ndarray | None = field(repr=False)  # of the last user turn, when one was computed
    refusal: str | None  # why the nearest near-duplicate was refused (guard reason or "verifier")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One near neighbour as the semantic layer judged it (for benchmarks and debugging)."""

    entry: Entry
    similarity: float
    refusal: str | None
    probability: float | None
