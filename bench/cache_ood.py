"""The semantic cache on questions unlike QQP's: hand-written pairs of assistant prompts
(``bench/data/README.md``), nothing of which trained, calibrated or tuned the cache.

    python -m bench.cache_ood [--pairs bench/data/ood_pairs.jsonl]

Each pair is stored in its own tenant, so the only candidate is the pair's own stored question;
bench.cache's three DECIDERS on the same lookups.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bench.cache import DECIDERS, REPO, bulk_cache, decide, in_batches, key, write_result
from bench.harness import md_table
from edge import CacheSettings, Embedder
from edge.cache import Verifier

DEFAULT = REPO / "bench" / "data" / "ood_pairs.jsonl"


@dataclass(frozen=True, slots=True)
class Pair:
    stored: str
    query: str
    servable: bool
    category: str
    domain: str


def load(path: Path) -> list[Pair]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Pair(r["stored"], r["query"], bool(r["servable"]), r["category"], r["domain"]) for r in rows]


async def replay(
    pairs: list[Pair], embedder: Embedder, work: Path, verifier: Verifier | None = None
) -> list[dict[str, Any]]:
    """Each pair's stored question in its own tenant, its query asked: what each decider does
    (``verifier``: another one than the shipped)."""
    tenants = [f"p{i}" for i in range(len(pairs))]
    cache = bulk_cache([p.stored for p in pairs], embedder, work / "ood.db", tenants, verifier=verifier)
    looks = await in_batches([cache.candidates(key(p.query, t)) for p, t in zip(pairs, tenants, strict=True)])
    rows: list[dict[str, Any]] = []
    for p, (_, cands) in zip(pairs, looks, strict=True):
        top = cands[0] if cands else None
        rows.append({
            "pair": p, "cosine": top.similarity if top is not None else 0.0,
            "refusal": top.refusal if top is not None else "floor",
            "probability": top.probability if top is not None else None,
            "served": {name: c is not None for name, c in decide(cands).items()},
        })
    threshold = cache.threshold
    await cache.aclose()
    for row in rows:
        row["threshold"] = threshold
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    servable = sum(r["pair"].servable for r in rows)
    out: dict[str, Any] = {"pairs": len(rows), "servable": servable, "deciders": {}, "categories": {}}
    for name in DECIDERS:
        served = [r for r in rows if r["served"][name]]
        right = sum(r["pair"].servable for r in served)
        out["deciders"][name] = {
            "served": len(served), "right": right, "wrong": len(served) - right,
            "precision": right / len(served) if served else 0.0,
            "recall_of_servable": right / servable if servable else 0.0,
        }
    for cat in dict.fromkeys(r["pair"].category for r in rows):
        mine = [r for r in rows if r["pair"].category == cat]
        out["categories"][cat] = {"pairs": len(mine), **{n: sum(r["served"][n] for r in mine) for n in DECIDERS}}
    refused = Counter(r["refusal"] for r in rows if r["refusal"] is not None)
    out["refusals"] = dict(refused.most_common())
    return out


def main(
    pairs: Annotated[Path, typer.Option(help="hand-written pairs (JSONL)")] = DEFAULT,
    out: Annotated[Path, typer.Option(help="JSON results")] = REPO / "artifacts" / "bench-cache-ood.json",
    work: Annotated[Optional[Path], typer.Option(help="scratch directory")] = None,
    verifier_dir: Annotated[Optional[Path], typer.Option(help="verifier files [default: the shipped ones]")] = None,
) -> None:
    work_dir = Path(tempfile.mkdtemp(prefix="bench-cache-ood-", dir=work))
    items = load(pairs)
    verifier = Verifier.load(verifier_dir) if verifier_dir is not None else None
    rows = asyncio.run(replay(items, Embedder.load(CacheSettings()), work_dir, verifier))
    result = summary(rows)
    print(f"{result['pairs']} hand-written pairs ({result['servable']} servable), verifier threshold {rows[0]['threshold']:.4f}")
    print(md_table(("decider", "served", "wrong", "precision", "recall of servable"),
                   [(n, r["served"], r["wrong"], r["precision"], r["recall_of_servable"])
                    for n, r in result["deciders"].items()]))
    print()
    print(md_table(("category", "pairs", *DECIDERS),
                   [(c, r["pairs"], *(r[n] for n in DECIDERS)) for c, r in result["categories"].items()]))
    print(f"refusals (shipped): {result['refusals']}")
    wrong = [r for r in rows if r["served"]["shipped"] and not r["pair"].servable]
    for r in wrong:
        p = r["pair"]
        print(f"  served, not servable ({p.category}, cos {r['cosine']:.3f}, p {r['probability']:.3f}): {p.stored!r} / {p.query!r}")
    result["served_not_servable"] = [
        {"stored": r["pair"].stored, "query": r["pair"].query, "category": r["pair"].category, "cosine": r["cosine"], "probability": r["probability"]}
        for r in wrong
    ]
    write_result(out, result, work_dir)


if __name__ == "__main__":
    typer.run(main)
