"""Does the shipped rule hold out of sample? The wrong rate of served semantic hits, per verifier
threshold, on every judged source: the calibration part (in sample) and the sources the threshold
was not fitted to (docs/cache.md).

    python -m bench.cache_holdout [--pairs ../shared/data/qqp_pairs.jsonl]

One lookup per query with every guard-passing candidate scored; a threshold serves the most
similar candidate whose probability reaches it. Also the shipped rule and the rule each
``max_wrong_rate`` calibrates to.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from bench.cache import (
    DEFAULT_PAIRS, REPO, bulk_cache, embed_texts, in_batches, judged_labels, key, stored_set, write_result,
)
from bench.cache_ood import load as load_ood
from edge import CacheSettings, EdgeCache, Embedder
from edge.cache import Judged, Pair, Verifier, load_judged, load_pairs, split_judged
from edge.cache.verifier import calibrated_threshold
from edge.cache.calibration import wrong_rate_upper
from edge.cache.keys import normalize_text

UNSEEN_SEED = 20261127
THRESHOLDS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99)
BUDGETS = (0.05, 0.03, 0.02, 0.01)
ALL = CacheSettings(verifier_threshold=0.0)  # every guard-passing candidate scored and accepted


def _verdicts(cands: list[Any], judge: Any) -> list[tuple[float, bool]]:
    """(probability, right) of each candidate the guards pass, most similar first."""
    return [(float(c.probability), bool(judge(c.entry.prompt_text))) for c in cands if c.refusal is None and c.probability is not None]


async def _candidates(cache: EdgeCache, keys: list[Any]) -> list[list[Any]]:
    looks = await in_batches([cache.candidates(k) for k in keys])
    await cache.aclose()
    return [cands for _, cands in looks]


async def judged(part: list[Any], stored: list[str], vecs: np.ndarray, embedder: Embedder, work: Path) -> dict[str, Any]:
    verdict, queries, answerable = judged_labels(part)
    cache = bulk_cache(stored, embedder, work / f"judged-{len(part)}.db", vecs=vecs, settings=ALL)
    looks = await _candidates(cache, [key(q) for q in queries])
    rows = [_verdicts(cands, lambda s, a=normalize_text(q): bool(verdict(a, s))) for q, cands in zip(queries, looks, strict=True)]
    return {"rows": rows, "positives": len(answerable)}


UNSEEN = REPO / "data" / "judged" / "unseen_qqp"


def _unseen_sample(pairs_path: Path) -> list[Pair]:
    lines = [int(n) for n in (UNSEEN / "sample_lines.txt").read_text().split()]
    everything = load_pairs(pairs_path)
    sample = [everything[n] for n in lines]
    random.Random(UNSEEN_SEED).shuffle(sample)
    return sample


def unseen_asked(pairs_path: Path) -> list[str]:
    """Every asked question of the unseen sample, exact hits included, in the replay's order."""
    return list(dict.fromkeys(normalize_text(p.b) for p in _unseen_sample(pairs_path)))


def unseen_set(pairs_path: Path) -> tuple[list[str], list[str], list[Judged]]:
    """The QQP sample outside every judged set: (stored questions, the asked questions that are not
    exact hits, the read (query, candidate) pairs), in the order the reading's replay used."""
    sample = _unseen_sample(pairs_path)
    stored = list(dict.fromkeys(normalize_text(p.a) for p in sample))
    lower = {s.lower() for s in stored}
    queries = [q for q in dict.fromkeys(normalize_text(p.b) for p in sample) if q.lower() not in lower]
    return stored, queries, load_judged(UNSEEN / "unseen_qqp.jsonl")


async def unseen(pairs_path: Path, embedder: Embedder, work: Path) -> dict[str, Any]:
    """Every sampled ``a`` stored, every ``b`` that is not an exact hit asked; each candidate was read."""
    stored, queries, read = unseen_set(pairs_path)
    label = {(j.query, j.stored): j.servable for j in read}
    cache = bulk_cache(stored, embedder, work / "unseen.db", settings=ALL)
    looks = await _candidates(cache, [key(q) for q in queries])
    unread = sum((q, c.entry.prompt_text) not in label for q, cands in zip(queries, looks, strict=True) for c in cands)
    rows = [_verdicts(cands, lambda s, q=q: label.get((q, s), False)) for q, cands in zip(queries, looks, strict=True)]
    return {"rows": rows, "positives": len({j.query for j in read if j.servable}), "unread_candidates": unread}


async def ood(path: Path, embedder: Embedder, work: Path) -> dict[str, Any]:
    pairs = load_ood(path)
    tenants = [f"p{i}" for i in range(len(pairs))]
    cache = bulk_cache([p.stored for p in pairs], embedder, work / f"{path.stem}.db", tenants, settings=ALL)
    looks = await _candidates(cache, [key(p.query, t) for p, t in zip(pairs, tenants, strict=True)])
    rows = [_verdicts(cands, lambda _s, p=p: p.servable) for p, cands in zip(pairs, looks, strict=True)]
    return {"rows": rows, "positives": sum(p.servable for p in pairs)}


def at(source: dict[str, Any], t: float, confidence: float = 0.8413) -> dict[str, Any]:
    served = [next((ok for p, ok in row if p >= t), None) for row in source["rows"]]
    hits = [s for s in served if s is not None]
    wrong = sum(1 for s in hits if not s)
    bound = float(wrong_rate_upper(np.array([wrong]), np.array([len(hits)]), confidence)[0]) if hits else None
    return {
        "served": len(hits), "wrong": wrong, "wrong_rate": wrong / len(hits) if hits else None, "bound": bound,
        "recall": (len(hits) - wrong) / source["positives"] if source["positives"] else 0.0,
    }


def main(
    pairs: Annotated[Path, typer.Option(help="QQP pairs JSONL (the stored set of the judged replays)")] = DEFAULT_PAIRS,
    out: Annotated[Path, typer.Option(help="JSON results")] = REPO / "artifacts" / "bench-cache-holdout.json",
    work: Annotated[Path | None, typer.Option(help="scratch directory")] = None,
) -> None:
    work_dir = Path(tempfile.mkdtemp(prefix="bench-cache-holdout-", dir=work))
    embedder = Embedder.load(CacheSettings())
    items = load_judged(None)
    parts = split_judged(items)
    stored = stored_set(pairs, items)
    vecs = embed_texts(embedder, stored)
    sources = {
        "calibration (in sample)": asyncio.run(judged(parts["calibration"], stored, vecs, embedder, work_dir)),
        "judged test": asyncio.run(judged(parts["test"], stored, vecs, embedder, work_dir)),
        "assistant pairs": asyncio.run(ood(REPO / "bench" / "data" / "ood_pairs.jsonl", embedder, work_dir)),
        "assistant val pairs": asyncio.run(ood(REPO / "bench" / "data" / "ood_val_pairs.jsonl", embedder, work_dir)),
        "unseen QQP sample": asyncio.run(unseen(pairs, embedder, work_dir)),
    }
    extra = sources["unseen QQP sample"]
    print(f"unseen QQP sample: {len(extra['rows'])} queries asked (exact hits left out), {extra['positives']} "
          f"answerable, {extra['unread_candidates']} candidates not read")
    verifier = Verifier.shipped()
    rules = {"shipped": calibrated_threshold(verifier, CacheSettings())}
    rules |= {f"max_wrong_rate {b}": verifier.operating_point(b, 0.8413, "wilson").threshold for b in BUDGETS}
    table: dict[str, Any] = {}
    header = f"| {'threshold':<26} | " + " | ".join(f"{n:>27}" for n in sources) + " |"
    print("served / wrong rate / recall of answerable, per source")
    print(header)
    for name, t in [*((n, t) for n, t in rules.items() if t is not None), *((f"{t:.2f}", t) for t in THRESHOLDS)]:
        row = {s: at(src, t) for s, src in sources.items()}
        table[name] = {"threshold": t, **row}
        cells = [f"{r['served']:>4} / {(r['wrong_rate'] or 0):.3f} / {r['recall']:.3f}" for r in row.values()]
        print(f"| {name + f' ({t:.4f})':<26} | " + " | ".join(f"{c:>27}" for c in cells) + " |")
    write_result(out, {"rules": rules, "table": table}, work_dir)
    print(json.dumps(rules))


if __name__ == "__main__":
    typer.run(main)
