"""Labeled question pairs (QQP's JSONL: ``{"a", "b", "duplicate"}``) and their fixed train/held-out split."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CacheError

HELDOUT_FRACTION = 0.2


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    duplicate: bool


def load_pairs(path: Path) -> list[Pair]:
    """Read a JSONL file of labeled pairs; a malformed line is an error naming its number."""
    pairs: list[Pair] = []
    try:
        with Path(path).open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    pairs.append(Pair(str(row["a"]), str(row["b"]), bool(row["duplicate"])))
                except (ValueError, KeyError, TypeError) as exc:
                    raise CacheError(f"{path}:{n}: expected {{'a', 'b', 'duplicate'}}: {exc}") from exc
    except OSError as exc:
        raise CacheError(f"cannot read pairs from {path}: {exc}") from exc
    return pairs


def is_heldout(pair: Pair) -> bool:
    """Deterministic split on the first question's text, so a repeated question stays on one side."""
    digest = hashlib.sha256(pair.a.strip().lower().encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < HELDOUT_FRACTION


def split_pairs(pairs: list[Pair]) -> tuple[list[Pair], list[Pair]]:
    """(train, held-out)."""
    train = [p for p in pairs if not is_heldout(p)]
    heldout = [p for p in pairs if is_heldout(p)]
    return train, heldout


def nearest_stored(
    queries: list[str], stored: list[str], query_vecs: np.ndarray, stored_vecs: np.ndarray, floor: float,
    chunk: int = 1024,
) -> Iterator[tuple[int, int, float]]:
    """The replay the judged parts were drawn from: for each query, its nearest stored question.

    Yields (query index, stored index, cosine) when the nearest stored question other than the
    query's own text (ignoring case: that is an exact-cache hit) is at or above ``floor``. Vectors
    are unit-length rows, so the dot product is the cosine.
    """
    for start in range(0, len(queries), chunk):
        sims = query_vecs[start : start + chunk] @ stored_vecs.T
        for j, row in enumerate(sims):
            q = queries[start + j].lower()
            for k in np.argsort(-row)[:3]:  # the same text in other cases is the query's own too
                if stored[k].lower() == q:
                    continue
                if row[k] >= floor:
                    yield start + j, int(k), float(row[k])
                break
