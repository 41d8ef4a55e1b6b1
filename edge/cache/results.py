"""The cache's records: an entry as stored and as read back, what a lookup finds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from models import Usage


@dataclass(frozen=True, slots=True)
class Entry:
    """One cached answer as read back."""

    id: int
    prompt_text: str
    answer: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    tier: str
    stop_word: str | None = None


@dataclass(frozen=True, slots=True)
class NewEntry:
    """One answer to store."""

    tenant: str
    exact_key: str
    scope: str
    model: str
    prompt_text: str
    request: dict[str, Any]
    answer: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    tier: str
    embedding: np.ndarray | None
    stop_word: str | None = None  # the stop sequence that ended the answer


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

    @classmethod
    def of(
        cls, kind: Literal["exact", "semantic"], entry: Entry, similarity: float, probability: float | None = None
    ) -> CacheHit:
        """The hit that serves ``entry``."""
        usage = Usage(entry.prompt_tokens, entry.completion_tokens)
        return cls(kind, entry.answer, entry.finish_reason, usage, similarity, entry.tier, entry.id, probability,
                   entry.stop_word)


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
