"""The judged replay set: (query, nearest stored question) pairs a reader judged servable or not.

Kept in the source repository's ``data/judged/`` (its README says how it was made), not in the
installed package: commands take ``--judged DIR``, and default to that folder when run from a
checkout. Split by a hash of the query text into train / calibration / test parts, so a query (and
every pair it is in) stays on one side: train for the verifier, calibration for Platt scaling and
the threshold, test for ``bench.cache`` only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import CacheError

Part = Literal["train", "calibration", "test"]
PARTS: tuple[Part, ...] = ("train", "calibration", "test")
# Cumulative bounds of the query-hash fraction: 35% train, 25% calibration, 40% test.
_BOUNDS = ((0.35, "train"), (0.60, "calibration"), (1.0, "test"))


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
    digest = hashlib.sha256(query.strip().lower().encode("utf-8")).digest()
    x = int.from_bytes(digest[:8], "big") / 2**64
    return next(name for bound, name in _BOUNDS if x < bound)  # type: ignore[return-value]


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
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CacheError(f"cannot read judged pairs from {path}: {exc}") from exc
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                label = row.get("label")
                item = Judged(
                    id=str(row["id"]), query=str(row["query"]), stored=str(row["stored"]),
                    cosine=float(row.get("cosine") or 0.0), servable=_bool(row["servable"]),
                    qqp_label=None if label is None else bool(label),
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise CacheError(f"{path}:{n}: expected {{id, query, stored, servable}}: {exc}") from exc
            out.setdefault((item.query, item.stored), item)
    return list(out.values())


def train_extra_dir() -> Path:
    """The train-split replay judged for training only (in a subdirectory, so ``load_judged`` of the
    judged directory never reads it into the calibration or test parts)."""
    return default_dir() / "train_extra"


def load_train_extra(paths: Iterable[Path] | Path | None = None) -> list[Judged]:
    """Judged pairs from QQP's train split: training data whatever their query hash says.

    They are not held-out pairs (their texts share nothing with the judged set), so they belong to no
    part; ``train`` adds them to the train part only. Pairs already in the judged set are dropped.
    """
    extra = load_judged(train_extra_dir() if paths is None else paths)
    base = {(j.query, j.stored) for j in load_judged()} if paths is None else set()
    return [j for j in extra if (j.query, j.stored) not in base]


def calibration_extra_dir() -> Path:
    """The rest of the held-out replay, judged for calibration only (a subdirectory, like train_extra)."""
    return default_dir() / "calibration_extra"


def load_calibration_extra(paths: Iterable[Path] | Path | None = None) -> list[Judged]:
    """Judged held-out replay pairs whose query is not in the judged set: calibration data only.

    Their query hash would put some in the test part's range, but the test part is the judged set's
    own test queries, which these never repeat: they belong to no part, and ``calibration_items``
    adds them to the calibration part only (never training, never test).
    """
    if paths is None:
        paths = calibration_extra_dir()
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
    parts: dict[Part, list[Judged]] = {p: [] for p in PARTS}
    for item in items:
        parts[item.part].append(item)
    return parts


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"servable must be true or false, not {value!r}")
