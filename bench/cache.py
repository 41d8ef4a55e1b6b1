"""Cache benchmark: the QQP held-out replay (quality) and lookup latency at 10k / 100k / 1M entries.

    python -m bench.cache [--pairs ../shared/data/qqp_pairs.jsonl] [--scales 10000,100000,1000000]

Quality: every held-out ``a`` is stored, every held-out ``b`` is looked up. A served hit is right
only when the pair is a duplicate and the entry served is its own ``a`` (identical ``a`` texts are
one entry). Three deciders in one run, on the same candidates: cosine >= 0.8 (GPTCache's
default), cosine >= 0.95, and the shipped setting (floor, guards, verifier). A second precision
column also counts as right a served entry that the labels link to the query (the same text, or
connected through labeled duplicate pairs), since QQP repeats questions across pairs.

Scale: synthetic vectors (mixtures of real question embeddings plus noise, each entry labeled
with the text of its main component) in one tenant, the worst case for the per-tenant scan.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from edge import CacheKey, CacheSettings, EdgeCache, Embedder  # noqa: E402
from edge.cache import LabelLinks, Verifier, load_pairs, split_pairs  # noqa: E402
from edge.cache.keys import exact_key, request_record, semantic_parts  # noqa: E402
from edge.cache.store import NewEntry  # noqa: E402
from models import SamplingParams  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_PAIRS = REPO.parent / "shared" / "data" / "qqp_pairs.jsonl"
GREEDY = SamplingParams(temperature=0.0)


def key(text: str, tenant: str = "bench") -> CacheKey:
    return CacheKey(tenant, "auto", ({"role": "user", "content": text},), None, GREEDY, {})


def entry(text: str, answer: str, tenant: str = "bench", ek: str | None = None) -> NewEntry:
    k = key(text, tenant)
    parts = semantic_parts(k)
    return NewEntry(
        tenant=tenant, exact_key=ek or exact_key(k), scope=parts.scope, scope_id=parts.scope_id, model="auto",
        prompt_text=parts.text, request=request_record(k), answer=answer, finish_reason="stop",
        prompt_tokens=0, completion_tokens=0, tier="edge", embedding=None,
    )


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q))


@dataclass
class Rates:
    served: int
    right: int
    right_linked: int
    duplicates: int
    queries: int

    def as_dict(self) -> dict[str, float]:
        return {
            "served": self.served,
            "hit_precision": self.right / self.served if self.served else 0.0,
            "duplicate_recall": self.right / self.duplicates,
            "false_hit_rate": (self.served - self.right) / self.queries,
            "precision_label_linked": self.right_linked / self.served if self.served else 0.0,
        }


async def replay(pairs_path: Path, embedder: Embedder, work: Path) -> dict[str, Any]:
    all_pairs = load_pairs(pairs_path)
    _, held = split_pairs(all_pairs)
    linked = LabelLinks(all_pairs)
    settings = CacheSettings()
    cache = EdgeCache(work / "replay.db", settings, embedder=embedder)
    a_texts = list(dict.fromkeys(p.a for p in held))
    t0 = time.perf_counter()
    a_vecs = np.concatenate([embedder.embed_batch(a_texts[i : i + 64]) for i in range(0, len(a_texts), 64)])
    rows = [entry(t, str(i)) for i, t in enumerate(a_texts)]
    cache.db.put_bulk(rows, a_vecs, now=time.time())
    build_s = time.perf_counter() - t0

    deciders = {"cosine@0.80": [], "cosine@0.95": [], "shipped": []}
    refusals: dict[str, int] = {}  # why the nearest candidate above the floor was refused
    nn_agree = 0
    nn_total = 0
    for start in range(0, len(held), 32):
        chunk = held[start : start + 32]
        results = await asyncio.gather(*(cache.candidates(key(p.b)) for p in chunk))
        for p, (vec, cands) in zip(chunk, results, strict=True):
            top = cands[0] if cands else None
            shipped = next((c for c in cands if c.refusal is None), None)
            deciders["cosine@0.80"].append((p, top if top and top.similarity >= 0.80 else None))
            deciders["cosine@0.95"].append((p, top if top and top.similarity >= 0.95 else None))
            deciders["shipped"].append((p, shipped))
            if shipped is None and top is not None and top.refusal is not None:
                refusals[top.refusal] = refusals.get(top.refusal, 0) + 1
            if vec is not None:  # index recall: the IVF's nearest vs exact brute force
                sims = a_vecs @ vec
                best = int(np.argmax(sims))
                if sims[best] >= settings.similarity_floor:
                    nn_total += 1
                    nn_agree += bool(top) and top.entry.prompt_text == semantic_parts(key(a_texts[best])).text
    duplicates = sum(p.duplicate for p in held)
    out: dict[str, Any] = {}
    for name, served in deciders.items():
        n = right = linked_right = 0
        for p, c in served:
            if c is None:
                continue
            n += 1
            own = c.entry.prompt_text == semantic_parts(key(p.a)).text
            right += p.duplicate and own
            linked_right += (p.duplicate and own) or linked.same(p.b, c.entry.prompt_text)
        out[name] = Rates(n, right, linked_right, duplicates, len(held)).as_dict()
    await cache.aclose()
    return {
        "heldout_pairs": len(held),
        "duplicates": duplicates,
        "entries": len(a_texts),
        "build_s": build_s,
        "deciders": out,
        "index_recall_at_1": nn_agree / nn_total if nn_total else None,
        "threshold": cache.threshold,
        "similarity_floor": settings.similarity_floor,
        "a_vecs": a_vecs,
        "a_texts": a_texts,
        "b_texts": [p.b for p in held],
        "refusals_of_nearest": refusals,
    }


async def scale(
    sizes: list[int], bases: np.ndarray, base_texts: list[str], queries: list[str], embedder: Embedder, work: Path,
    n_queries: int,
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    settings = CacheSettings(max_entries=max(sizes) + 10)
    cache = EdgeCache(work / "scale.db", settings, embedder=embedder)
    verifier = Verifier.shipped()
    results = []
    have = 0
    for size in sizes:
        t0 = time.perf_counter()
        while have < size:
            n = min(50_000, size - have)
            i = rng.integers(0, len(bases), n)
            j = rng.integers(0, len(bases), n)
            vecs = bases[i] + rng.uniform(0.2, 0.6, (n, 1)).astype(np.float32) * bases[j]
            vecs += rng.standard_normal(vecs.shape).astype(np.float32) * 0.02
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            rows = [entry(base_texts[i[k]], f"a{have + k}", ek=f"syn-{have + k}") for k in range(n)]
            cache.db.put_bulk(rows, vecs, now=time.time())
            have += n
        build_s = time.perf_counter() - t0
        # search alone: the stored vectors, slightly perturbed (a near-duplicate must be found)
        probe_ids = rng.integers(1, have + 1, n_queries)
        scope = semantic_parts(key("x"))
        search_t, found = [], 0
        for pid in probe_ids:
            blob = cache.db.read.execute("SELECT embedding FROM entries WHERE id = ?", (int(pid),)).fetchone()[0]
            v = np.frombuffer(blob, dtype=np.float32) + rng.standard_normal(384).astype(np.float32) * 0.01
            v /= np.linalg.norm(v)
            s = time.perf_counter()
            hits = cache.db.search("bench", scope.scope, scope.scope_id, v, nprobe=settings.nprobe,
                                   probe_k=settings.probe_k, min_created=0.0, tiers=("edge",))
            search_t.append(time.perf_counter() - s)
            found += bool(hits) and hits[0][0].id == int(pid)
        # full semantic lookup: real question texts, embedding + search + guards + verifier
        lookup_t = []
        for text in queries[:n_queries]:
            s = time.perf_counter()
            await cache.lookup(key(text))
            lookup_t.append(time.perf_counter() - s)
        # exact hits: stored keys looked up again (in process; the HTTP path adds the server)
        exact_keys = [key(f"exact question {have}-{n}", tenant="bench-exact") for n in range(n_queries // 2)]
        exact_rows = [replace(entry(k.messages[0]["content"], "answer", tenant="bench-exact")) for k in exact_keys]
        cache.db.put(exact_rows, now=time.time(), max_entries=settings.max_entries)
        exact_t = []
        for k in exact_keys:
            s = time.perf_counter()
            look = await cache.lookup(k)
            exact_t.append(time.perf_counter() - s)
            assert look.hit is not None and look.hit.kind == "exact"
        results.append({
            "entries": have,
            "build_s": build_s,
            "search_p50_ms": pct(search_t, 50), "search_p99_ms": pct(search_t, 99),
            "near_duplicate_found": found / len(probe_ids),
            "semantic_lookup_p50_ms": pct(lookup_t, 50), "semantic_lookup_p99_ms": pct(lookup_t, 99),
            "exact_lookup_p50_ms": pct(exact_t, 50), "exact_lookup_p99_ms": pct(exact_t, 99),
            "file_mb": cache.db.stats()["file_bytes"] / 1e6,
        })
        print(f"  {have:>9,} entries: built in {build_s:.1f}s, search p50 {results[-1]['search_p50_ms']:.2f} ms",
              flush=True)
    # verifier and embedding alone
    a, b = embedder.embed_batch(["How do I reset my password?", "How can I reset my password?"])
    ver_t = []
    for _ in range(500):
        s = time.perf_counter()
        verifier.probability("How can I reset my password?", b, "How do I reset my password?", a)
        ver_t.append(time.perf_counter() - s)
    emb_t = []
    for text in queries[:n_queries]:
        s = time.perf_counter()
        await embedder.embed(text)
        emb_t.append(time.perf_counter() - s)
    await cache.aclose()
    return results + [{
        "verifier_p50_ms": pct(ver_t, 50), "verifier_p99_ms": pct(ver_t, 99),
        "embed_p50_ms": pct(emb_t, 50), "embed_p99_ms": pct(emb_t, 99),
    }]


def main(
    pairs: Annotated[Path, typer.Option(help="labeled pairs JSONL")] = DEFAULT_PAIRS,
    scales: Annotated[str, typer.Option(help="comma-separated entry counts")] = "10000,100000,1000000",
    queries: Annotated[int, typer.Option(help="timed lookups per scale")] = 300,
    out: Annotated[Path, typer.Option(help="JSON results")] = REPO / "artifacts" / "bench-cache.json",
    work: Annotated[Path | None, typer.Option(help="scratch directory for the databases")] = None,
) -> None:
    if not pairs.is_file():
        typer.echo(f"skipped: {pairs} is absent (the QQP pairs live in ../shared/data)")
        raise typer.Exit(0)
    work_dir = Path(tempfile.mkdtemp(prefix="bench-cache-", dir=work))
    embedder = Embedder.load(CacheSettings())
    print("QQP held-out replay ...", flush=True)
    rep = asyncio.run(replay(pairs, embedder, work_dir))
    sizes = [int(s) for s in scales.split(",") if s]
    print("lookup latency at scale (synthetic vectors) ...", flush=True)
    scale_rows = asyncio.run(scale(sizes, rep.pop("a_vecs"), rep.pop("a_texts"), rep.pop("b_texts"), embedder,
                                   work_dir, queries))
    timings = scale_rows.pop()
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "replay": rep, "scale": scale_rows, "components": timings,
    }
    print()
    print(f"QQP held-out replay: {rep['heldout_pairs']} queries, {rep['entries']} entries, "
          f"{rep['duplicates']} duplicate pairs; verifier threshold {rep['threshold']:.3f}, "
          f"cosine floor {rep['similarity_floor']}")
    print(f"{'decider':<14}{'served':>8}{'precision':>11}{'dup recall':>12}{'false-hit':>11}{'prec (linked)':>15}")
    for name, r in rep["deciders"].items():
        print(f"{name:<14}{r['served']:>8}{r['hit_precision']:>11.3f}{r['duplicate_recall']:>12.3f}"
              f"{r['false_hit_rate']:>11.3f}{r['precision_label_linked']:>15.3f}")
    print(f"refusals of the nearest candidate (shipped): {rep['refusals_of_nearest']}")
    print(f"IVF index recall@1 vs exact search (neighbours above the floor): {rep['index_recall_at_1']:.3f}")
    print()
    print(f"{'entries':>10}{'build s':>9}{'search p50/p99 ms':>20}{'semantic p50/p99 ms':>22}"
          f"{'exact p50/p99 ms':>19}{'found':>7}{'file MB':>9}")
    for r in scale_rows:
        print(f"{r['entries']:>10,}{r['build_s']:>9.1f}{r['search_p50_ms']:>11.2f} /{r['search_p99_ms']:>6.2f}"
              f"{r['semantic_lookup_p50_ms']:>13.2f} /{r['semantic_lookup_p99_ms']:>6.2f}"
              f"{r['exact_lookup_p50_ms']:>10.2f} /{r['exact_lookup_p99_ms']:>6.2f}"
              f"{r['near_duplicate_found']:>7.2f}{r['file_mb']:>9.0f}")
    print(f"embedding p50/p99 {timings['embed_p50_ms']:.2f}/{timings['embed_p99_ms']:.2f} ms; "
          f"verifier p50/p99 {timings['verifier_p50_ms']:.3f}/{timings['verifier_p99_ms']:.3f} ms")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    for p in work_dir.glob("*"):
        p.unlink()
    work_dir.rmdir()


if __name__ == "__main__":
    typer.run(main)
