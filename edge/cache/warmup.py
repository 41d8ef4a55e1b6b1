"""Warm-up: load prompt/answer pairs from a JSONL file into the cache before traffic arrives.

One JSON object a line::

    {"prompt": "How do I reset my password?", "answer": "Open Settings > Account ..."}

Optional fields: ``tenant`` (default "default"), ``model`` (default "auto"), ``messages`` (a chat
transcript instead of ``prompt``), ``kind`` ("chat", the default: the prompt becomes one user
message; or "completion"), and the sampling parameters ``temperature`` (default 0),
``top_p``, ``max_tokens``, ``stop``, ``seed``. An entry serves requests with the same parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models import SamplingParams

from .judged import read_jsonl
from .keys import CacheKey


@dataclass(frozen=True, slots=True)
class WarmItem:
    key: CacheKey
    answer: str


def read_warmup(path: Path) -> Iterator[WarmItem]:
    """Parse the file; a malformed line is an error naming its number."""
    return read_jsonl(path, "warm-up pairs", _item)


def _item(row: dict[str, Any]) -> WarmItem:
    if not isinstance(row.get("answer"), str):
        raise ValueError("'answer' must be a string")
    stop = row.get("stop") or ()
    params = SamplingParams(
        max_tokens=row.get("max_tokens"),
        temperature=float(row.get("temperature", 0.0)),
        top_p=float(row.get("top_p", 1.0)),
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        seed=row.get("seed"),
    )
    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    if "messages" in row:
        messages = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in row["messages"])
    elif isinstance(row.get("prompt"), str):
        if row.get("kind", "chat") == "chat":
            messages = ({"role": "user", "content": row["prompt"]},)
        else:
            prompt = row["prompt"]
    else:
        raise ValueError("each line needs 'prompt' or 'messages'")
    key = CacheKey(
        tenant=str(row.get("tenant", "default")),
        model=str(row.get("model", "auto")),
        messages=messages,
        prompt=prompt,
        params=params,
        extra=dict(row.get("extra", {})),
    )
    return WarmItem(key, row["answer"])
