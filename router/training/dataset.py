"""The labeled prompt set: loading, validation and the fixed held-out split."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..policy.features import Target

SHIPPED_PROMPTS = Path(__file__).resolve().parents[1] / "policy" / "data" / "prompts.jsonl"
HELD_OUT_BUCKETS = 5  # one bucket in five is held out: about 20%

Split = Literal["train", "test", "all"]


@dataclass(frozen=True, slots=True)
class LabeledPrompt:
    text: str
    label: Target | None  # None in an unlabeled prompt set (calibration)
    category: str | None = None


def is_held_out(text: str) -> bool:
    """Whether ``text`` belongs to the held-out split; fixed by a hash of the normalised text."""
    digest = hashlib.sha256(" ".join(text.lower().split()).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_BUCKETS == 0


def select(prompts: Sequence[LabeledPrompt], split: Split) -> list[LabeledPrompt]:
    return [p for p in prompts if split == "all" or is_held_out(p.text) == (split == "test")]


def load_prompts(path: Path | None = None, *, require_labels: bool = True) -> list[LabeledPrompt]:
    """Read a prompt set: JSONL with ``text`` (or ``prompt``) and ``label`` (edge|cloud), or, for a
    file not ending in ``.jsonl``, one unlabeled prompt per line."""
    path = Path(path) if path is not None else SHIPPED_PROMPTS
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read prompt set {path}: {exc}", param="prompts") from exc
    if path.suffix != ".jsonl":
        prompts = [LabeledPrompt(line.strip(), None) for line in lines if line.strip()]
    else:
        prompts = [_parse(line, f"{path}:{n}") for n, line in enumerate(lines, 1) if line.strip()]
    if not prompts:
        raise ConfigError(f"prompt set {path} is empty", param="prompts")
    if require_labels:
        unlabeled = sum(p.label is None for p in prompts)
        if unlabeled:
            raise ConfigError(f"{unlabeled} prompt(s) in {path} have no label (edge|cloud)", param="prompts")
    return prompts


def _parse(line: str, where: str) -> LabeledPrompt:
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise ConfigError(f"{where}: invalid JSON: {exc}", param="prompts") from exc
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: expected a JSON object", param="prompts")
    text = row.get("text", row.get("prompt"))
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: missing non-empty 'text'", param="prompts")
    label = row.get("label")
    if label not in (None, "edge", "cloud"):
        raise ConfigError(f"{where}: label must be 'edge' or 'cloud', got {label!r}", param="prompts")
    category = row.get("category")
    return LabeledPrompt(text, label, category if isinstance(category, str) else None)
