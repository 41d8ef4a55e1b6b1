"""What the candidate scripts of the judged parts share: the replay (every `a` of the pairs stored,
every `b` asks; the nearest stored question, by exact cosine over the shipped embedder, kept when
it is >= 0.80 and not the query's own text, an exact-cache hit), the files the readers get, and
the join of their verdicts.

Imported by ``make_candidates.py``, ``train_extra*/make_train_candidates.py``,
``train_extra*/make_train_extra.py`` and ``calibration_extra/make_calibration_extra.py``.
"""

import json
from pathlib import Path

import numpy as np

from edge import CacheSettings, Embedder
from edge.cache.keys import normalize_text
from edge.cache.judged import nearest_stored

FLOOR = 0.80
_embedder: list[Embedder] = []


def embed(texts: list[str]) -> np.ndarray:
    if not _embedder:
        _embedder.append(Embedder.load(CacheSettings()))
    return np.concatenate([_embedder[0].embed_batch(texts[i : i + 64]) for i in range(0, len(texts), 64)])


def replay(pairs: list, what: str, seen: set[str] = frozenset()) -> list[dict]:
    """The replay's pairs above the floor whose texts (lower-cased) are not in ``seen``."""
    label = {(normalize_text(p.b), normalize_text(p.a)): p.duplicate for p in pairs}
    stored = list(dict.fromkeys(normalize_text(p.a) for p in pairs))
    queries = list(dict.fromkeys(normalize_text(p.b) for p in pairs))
    S, Q = embed(stored), embed(queries)
    rows = [
        {"query": queries[i], "stored": stored[k], "cosine": round(cos, 4), "label": label.get((queries[i], stored[k]))}
        for i, k, cos in nearest_stored(queries, stored, Q, S, FLOOR)
        if queries[i].lower() not in seen and stored[k].lower() not in seen
    ]
    print(f"{what} {len(pairs)}, stored {len(stored)}, queries {len(queries)}, above floor {len(rows)}")
    return rows


def write(out: Path, rows: list[dict], prefix: str, per: int) -> int:
    """``candidates.jsonl`` (ids ``prefix`` + number, in ``rows``' order) and the readers' shards of
    ``per`` pairs (``shard_N.jsonl``: id, query, stored); the number of shards."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "candidates.jsonl").open("w") as fh:
        for i, r in enumerate(rows):
            fh.write(json.dumps({"id": f"{prefix}{i:04d}", **r}) + "\n")
    shards = (len(rows) + per - 1) // per
    for s in range(shards):
        with (out / f"shard_{s}.jsonl").open("w") as fh:
            for i, r in enumerate(rows[s * per : (s + 1) * per], s * per):
                fh.write(json.dumps({"id": f"{prefix}{i:04d}", "query": r["query"], "stored": r["stored"]}) + "\n")
    return shards


def read_rows(path: Path) -> list[dict]:
    """The objects of a JSONL file; [] when there is no such file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def join(candidates: list[dict], verdicts: dict[str, dict], out: Path) -> int:
    """Write to ``out`` each candidate with its reader's verdict (``servable``, ``why``), in the
    candidates' order; one without a verdict is left out. Returns how many were written. Nothing
    here decides a verdict: it only copies the readers' ones."""
    kept = 0
    with out.open("w") as fh:
        for c in candidates:
            v = verdicts.get(c["id"])
            if v is None:
                continue
            if not isinstance(v["servable"], bool):
                raise SystemExit(f"{c['id']}: servable must be true or false")
            fh.write(json.dumps({**c, "servable": v["servable"], "why": v.get("why", "")}) + "\n")
            kept += 1
    return kept
