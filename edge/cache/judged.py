"""Labeled question pairs: QQP's (``{"a", "b", "duplicate"}``) and the judged replay set, (query,
nearest stored question) pairs a reader judged servable or not (``data/judged/``, not installed).

Split by a hash of the query text into train / calibration / test parts, so a query (and every pair
it is in) stays on one side: train for the verifier, calibration for Platt scaling and the
threshold, test for ``bench.cache`` only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from ..errors import CacheError

T = TypeVar("T")
HELDOUT_FRACTION = 0.2

Part = Literal["train", "calibration", "test"]
# Cumulative bounds of the query-hash fraction: 35% train, 25% calibration, 40% test.
_BOUNDS: tuple[tuple[float, Part], ...] = ((0.35, "train"), (0.60, "calibration"), (1.0, "test"))


def read_jsonl(
    path: Path, what: str, parse: Callable[[dict[str, Any]], T], expected: str = ""
) -> Iterator[T]:
    """``parse`` of each line of a JSONL file of ``what``; a malformed line is an error naming its
    number (and the ``expected`` fields)."""
    try:
        fh = Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise CacheError(f"cannot read {what} from {path}: {exc}") from exc
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield parse(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise CacheError(f"{path}:{n}: {expected}{exc}") from exc


def _fraction(text: str) -> float:
    """Where ``text`` (stripped, lowercased) falls in [0, 1), by its sha256: a fixed split."""
    digest = hashlib.sha256(text.strip().lower().encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    duplicate: bool


def load_pairs(path: Path) -> list[Pair]:
    """Read a JSONL file of labeled pairs; a malformed line is an error naming its number."""
    return list(read_jsonl(
        path, "pairs", lambda row: Pair(str(row["a"]), str(row["b"]), bool(row["duplicate"])),
        "expected {'a', 'b', 'duplicate'}: ",
    ))


def is_heldout(pair: Pair) -> bool:
    """Deterministic split on the first question's text, so a repeated question stays on one side."""
    return _fraction(pair.a) < HELDOUT_FRACTION


def split_pairs(pairs: list[Pair]) -> tuple[list[Pair], list[Pair]]:
    """(train, held-out)."""
    return [p for p in pairs if not is_heldout(p)], [p for p in pairs if is_heldout(p)]


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


@dataclass(frozen=True, slots=True)
class Judged:
    id: str
    query: str  # the question asked
    stored: str  # its nearest stored question (above the cosine floor when sampled)
    cosine: float
    servable: bool  # the reader's judgement: a good answer to ``stored`` fully answers ``query``
    qqp_label: bool | None  # QQP's duplicate label when the pair is a QQP pair

    @property
    def part(self) -> Part:
        return part_of(self.query)


def part_of(query: str) -> Part:
    x = _fraction(query)
    return next(name for bound, name in _BOUNDS if x < bound)


# edge/cache/judged.py -> the repository's root, when this runs from a checkout (or an editable install).
REPO_JUDGED = Path(__file__).resolve().parents[2] / "data" / "judged"


def default_dir() -> Path:
    """The judged set of the source repository (``data/judged/``); an installed wheel has none."""
    if not (REPO_JUDGED / "judged.jsonl").is_file():
        raise CacheError(
            "the judged set is not part of the installed package: give --judged DIR "
            "(data/judged/ of the edgeroute source repository)"
        )
    return REPO_JUDGED


def load_judged(paths: Iterable[Path] | Path | None = None) -> list[Judged]:
    """Judged pairs from JSONL files (or every ``*.jsonl`` of a directory; default: ``data/judged/``).

    A pair judged twice (same query and stored text) keeps its first judgement; files are read in
    name order so the result is deterministic.
    """
    if paths is None:
        paths = default_dir()
    if isinstance(paths, Path):
        paths = sorted(paths.glob("*.jsonl")) if paths.is_dir() else [paths]
    out: dict[tuple[str, str], Judged] = {}
    for path in paths:
        for item in read_jsonl(path, "judged pairs", _judged, "expected {id, query, stored, servable}: "):
            out.setdefault((item.query, item.stored), item)
    return list(out.values())


def _judged(row: dict[str, Any]) -> Judged:
    label = row.get("label")
    if not isinstance(row["servable"], bool):
        raise TypeError(f"servable must be true or false, not {row['servable']!r}")
    return Judged(
        id=str(row["id"]), query=str(row["query"]), stored=str(row["stored"]),
        cosine=float(row.get("cosine") or 0.0), servable=row["servable"],
        qqp_label=None if label is None else bool(label),
    )


def load_train_extra(paths: Iterable[Path] | Path | None = None) -> list[Judged]:
    """Judged pairs from QQP's train split (default: ``train_extra/``): training data whatever their
    query hash says, less the pairs already in the judged set."""
    extra = load_judged(default_dir() / "train_extra" if paths is None else paths)
    base = {(j.query, j.stored) for j in load_judged()} if paths is None else set()
    return [j for j in extra if (j.query, j.stored) not in base]


def load_calibration_extra(paths: Iterable[Path] | Path | None = None) -> list[Judged]:
    """Judged held-out replay pairs whose query is not in the judged set (default:
    ``calibration_extra/``): calibration data only, whatever their query hash says."""
    if paths is None:
        paths = default_dir() / "calibration_extra"
        if not paths.is_dir():
            return []
    return load_judged(paths)


def calibration_items(judged: Iterable[Judged], extra: Iterable[Judged] = ()) -> list[Judged]:
    """The calibration part of ``judged`` plus ``extra``, less any extra pair whose query (ignoring
    case) is a query of ``judged`` in any part: a test or train query can never calibrate."""
    items = list(judged)
    seen = {j.query.strip().lower() for j in items}
    cal = split_judged(items)["calibration"]
    return cal + [j for j in extra if j.query.strip().lower() not in seen]


def split_judged(items: Iterable[Judged]) -> dict[Part, list[Judged]]:
    parts: dict[Part, list[Judged]] = {name: [] for _, name in _BOUNDS}
    for item in items:
        parts[item.part].append(item)
    return parts
