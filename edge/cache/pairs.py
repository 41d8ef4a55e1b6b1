"""Labeled question pairs (QQP's JSONL: ``{"a", "b", "duplicate"}``) and their fixed train/held-out split."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

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
