"""Cache benchmark: the judged test replay, adversarial edits, and lookup latency at scale.

    python -m bench.cache [--pairs ../shared/data/qqp_pairs.jsonl] [--judged DIR] [--scales 10000,100000]
    python -m bench.cache --feedback [--unseen [--exact]]   (a judged stream over HTTP, with and without ratings)

Judged replay: every held-out QQP ``a`` text stored, every query of the judged *test* part asked,
three DECIDERS on the same lookups. Only the nearest pairs are judged, so serving any other entry
counts as wrong unless it is the query's own text. Adversarial: ``bench/cache_adversarial.py``.
Scale: synthetic vectors (mixtures of real question embeddings plus noise) in one tenant, the
worst case for the per-tenant scan.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import numpy as np
import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from edge import CacheKey, CacheSettings, EdgeCache, Embedder  # noqa: E402
from bench.cache_adversarial import SEED as ADVERSARIAL_SEED  # noqa: E402
from bench.cache_adversarial import generate as generate_adversarial  # noqa: E402
from bench.harness import md_table, write_json  # noqa: E402
from edge.cache import Judged, Verifier, load_judged, load_pairs, split_judged, split_pairs  # noqa: E402
from edge.cache.keys import exact_key, normalize_text, request_record, semantic_parts  # noqa: E402
from edge.cache.results import Candidate  # noqa: E402
from edge.cache.store import NewEntry  # noqa: E402
from models import SamplingParams  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_PAIRS = REPO.parent / "shared" / "data" / "qqp_pairs.jsonl"
GREEDY = SamplingParams(temperature=0.0)
# The nearest above a cosine (GPTCache's default, a strict one), and the shipped setting: floor,
# guards and the calibrated verifier at the default error budget.
DECIDERS = ("cosine >= 0.80", "cosine >= 0.97", "shipped")
T = TypeVar("T")


def key(text: str, tenant: str = "bench", params: SamplingParams = GREEDY) -> CacheKey:
    return CacheKey(tenant, "auto", ({"role": "user", "content": text},), None, params, {})


def entry(
    text: str, answer: str, tenant: str = "bench", ek: str | None = None, params: SamplingParams = GREEDY
) -> NewEntry:
    k = key(text, tenant, params)
    parts = semantic_parts(k)
    return NewEntry(
        tenant=tenant, exact_key=ek or exact_key(k), scope=parts.scope, model="auto",
        prompt_text=parts.text, request=request_record(k), answer=answer, finish_reason="stop",
        prompt_tokens=0, completion_tokens=0, tier="edge", embedding=None,
    )


def write_result(out: Path, result: dict[str, Any], work_dir: Path) -> None:
    write_json(out, result)
    print(f"wrote {out}")
    shutil.rmtree(work_dir, ignore_errors=True)


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q))


def stored_set(pairs_path: Path, judged: list[Judged]) -> list[str]:
    """What the judged replay stored: every held-out ``a`` of the QQP pairs, plus each judged stored text."""
    _, held = split_pairs(load_pairs(pairs_path))
    return list(dict.fromkeys([*(p.a for p in held), *(j.stored for j in judged)]))


def embed_texts(embedder: Embedder, texts: list[str]) -> np.ndarray:
    return np.concatenate([embedder.embed_batch(texts[i : i + 64]) for i in range(0, len(texts), 64)])


def bulk_cache(
    texts: list[str], embedder: Embedder, path: Path, tenant: str | list[str] = "bench",
    vecs: np.ndarray | None = None, settings: CacheSettings | None = None, verifier: Verifier | None = None,
    params: SamplingParams = GREEDY, answer: str = "{}",
) -> EdgeCache:
    """A cache holding ``texts``, inserted in bulk: entry i answers ``answer.format(i)``, keyed with
    ``params``, in ``tenant`` (or ``tenant[i]``)."""
    cache = EdgeCache(path, settings or CacheSettings(), embedder=embedder, verifier=verifier)
    vecs = embed_texts(embedder, texts) if vecs is None else vecs
    tenants = [tenant] * len(texts) if isinstance(tenant, str) else tenant
    rows = [entry(t, answer.format(i), tenants[i], params=params) for i, t in enumerate(texts)]
    cache.db.put_bulk(rows, vecs, now=time.time())
    return cache


async def in_batches(calls: list[Coroutine[Any, Any, T]], size: int = 32) -> list[T]:
    out: list[T] = []
    for start in range(0, len(calls), size):
        out += await asyncio.gather(*calls[start : start + size])
    return out


def judged_labels(part: list[Judged]) -> tuple[Callable[[str, str], bool | None], list[str], set[str]]:
    """The verdict of serving a stored question for an asked one (normalized texts; None: not judged),
    the distinct queries in order, and the answerable ones (normalized; a servable stored question
    was judged for them)."""
    label = {(normalize_text(j.query), normalize_text(j.stored)): j.servable for j in part}

    def verdict(asked: str, served: str) -> bool | None:
        # The same text in another case is the same question (the replay skipped those as
        # exact-cache territory when it sampled the judged pairs).
        return True if served.lower() == asked.lower() else label.get((asked, served))

    return verdict, list(dict.fromkeys(j.query for j in part)), {normalize_text(j.query) for j in part if j.servable}


def decide(cands: list[Candidate]) -> dict[str, Candidate | None]:
    """What each of DECIDERS serves of a lookup's candidates (best first)."""
    top = cands[0] if cands else None
    return {
        "cosine >= 0.80": top if top and top.similarity >= 0.80 else None,
        "cosine >= 0.97": top if top and top.similarity >= 0.97 else None,
        "shipped": next((c for c in cands if c.refusal is None), None),
    }


async def judged_replay(
    test: list[Judged], stored: list[str], stored_vecs: np.ndarray, embedder: Embedder, work: Path
) -> dict[str, Any]:
    """Warm every stored question, ask every judged test query through the cache; three deciders."""
    verdict, queries, answerable = judged_labels(test)
    cache = bulk_cache(stored, embedder, work / "judged.db", vecs=stored_vecs)
    counts: dict[str, Counter[str]] = {name: Counter() for name in DECIDERS}
    refusals: Counter[str] = Counter()
    looks = await in_batches([cache.candidates(key(q)) for q in queries])
    for q, (_, cands) in zip(queries, looks, strict=True):
        picks = decide(cands)
        for name, c in picks.items():
            if c is not None:
                right = verdict(normalize_text(q), c.entry.prompt_text)
                counts[name].update(served=1, right=bool(right), unjudged=right is None)
        if picks["shipped"] is None and cands:
            refusals[cands[0].refusal or ""] += 1
    await cache.aclose()
    n = len(answerable)
    return {
        "queries": len(queries), "answerable": n, "entries": len(stored),
        "threshold": cache.threshold, "max_wrong_rate": cache.settings.max_wrong_rate,
        "deciders": {name: {
            "served": c["served"], "right": c["right"], "precision": c["right"] / c["served"] if c["served"] else 0.0,
            "recall_of_answerable": c["right"] / n if n else 0.0, "served_unjudged_entry": c["unjudged"],
        } for name, c in counts.items()},
        "refusals_of_nearest": dict(refusals),
    }


async def adversarial(
    questions: list[str], embedder: Embedder, work: Path, seed: int = ADVERSARIAL_SEED, per_category: int = 80
) -> dict[str, Any]:
    """Held-out questions stored; their adversarial edits asked (must refuse) and paraphrases (may serve)."""
    pairs = generate_adversarial(questions, per_category=per_category, seed=seed)
    stored = list(dict.fromkeys(p.stored for p in pairs))
    answer_of = {t: str(i) for i, t in enumerate(stored)}  # bulk_cache answers entry i with "i"
    cache = bulk_cache(stored, embedder, work / "adversarial.db")
    per: dict[str, dict[str, int]] = {}
    examples: dict[str, list[list[str]]] = {}
    looks = await in_batches([cache.lookup(key(p.query)) for p in pairs])
    for p, look in zip(pairs, looks, strict=True):
        row = per.setdefault(p.category, {"pairs": 0, "served": 0, "served_own": 0})
        row["pairs"] += 1
        if look.hit is not None and look.hit.kind == "semantic":
            row["served"] += 1
            row["served_own"] += look.hit.text == answer_of[p.stored]
            if p.category != "paraphrase" and len(examples.setdefault(p.category, [])) < 5:
                examples[p.category].append([p.query, p.stored])
    await cache.aclose()
    return {"seed": seed, "categories": per, "false_hit_examples": examples}


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
            hits = cache.db.search("bench", scope.scope, v, nprobe=settings.nprobe,
                                   probe_k=settings.probe_k, min_created=0.0)
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
        exact_rows = [entry(k.messages[0]["content"], "answer", tenant="bench-exact") for k in exact_keys]
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
    ver_t, emb_t = [], []
    for text in queries[:n_queries]:
        s = time.perf_counter()  # three candidates, one batched run: a lookup's worst case
        verifier.probabilities(text, base_texts[:3], [0.9, 0.88, 0.85])
        ver_t.append(time.perf_counter() - s)
        s = time.perf_counter()
        await embedder.embed(text)
        emb_t.append(time.perf_counter() - s)
    await cache.aclose()
    return results + [{
        "verifier_p50_ms": pct(ver_t, 50), "verifier_p99_ms": pct(ver_t, 99),
        "embed_p50_ms": pct(emb_t, 50), "embed_p99_ms": pct(emb_t, 99),
    }]


def main(
    pairs: Annotated[Path, typer.Option(help="QQP pairs JSONL (the stored set of the replay)")] = DEFAULT_PAIRS,
    judged: Annotated[Optional[Path], typer.Option(help="judged pairs [default: data/judged/]")] = None,
    scales: Annotated[str, typer.Option(help="comma-separated entry counts")] = "10000,100000",
    queries: Annotated[int, typer.Option(help="timed lookups per scale")] = 300,
    out: Annotated[Path, typer.Option(help="JSON results")] = REPO / "artifacts" / "bench-cache.json",
    work: Annotated[Optional[Path], typer.Option(help="scratch directory for the databases")] = None,
    adversarial_seed: Annotated[int, typer.Option(help="seed of the adversarial edits")] = ADVERSARIAL_SEED,
    per_category: Annotated[int, typer.Option(help="adversarial pairs per must-refuse category (at most)")] = 80,
    feedback: Annotated[bool, typer.Option(
        "--feedback", help="only the judged stream over HTTP, with and without ratings (bench/cache_feedback.py)")] = False,
    unseen: Annotated[bool, typer.Option(
        "--unseen", help="with --feedback: the QQP sample outside every judged set (data/judged/unseen_qqp)")] = False,
    exact: Annotated[bool, typer.Option(
        "--exact", help="with --unseen: ask its exact hits too (questions that are a stored one's own text)")] = False,
) -> None:
    if not pairs.is_file():
        typer.echo(f"skipped: {pairs} is absent (the QQP pairs live in ../shared/data)")
        raise typer.Exit(0)
    work_dir = Path(tempfile.mkdtemp(prefix="bench-cache-", dir=work))
    embedder = Embedder.load(CacheSettings())
    items = load_judged(judged)
    test = split_judged(items)["test"]
    stored = stored_set(pairs, items)
    if feedback:
        from bench import cache_feedback

        if unseen:
            from bench.cache_holdout import unseen_asked, unseen_set

            stored, _, test = unseen_set(pairs)
        asked = unseen_asked(pairs) if unseen and exact else None
        fed = cache_feedback.run(test, stored, embed_texts(embedder, stored), embedder, work_dir, exact=asked)
        cache_feedback.report(fed)
        write_result(out.with_name(out.stem + "-feedback.json"), {"feedback_replay": fed}, work_dir)
        return
    print(f"judged test replay: {len(test)} judged pairs, {len(stored)} stored questions ...", flush=True)
    stored_vecs = embed_texts(embedder, stored)
    rep = asyncio.run(judged_replay(test, stored, stored_vecs, embedder, work_dir))
    _, held = split_pairs(load_pairs(pairs))
    held_questions = list(dict.fromkeys(t for p in held for t in (p.a, p.b)))
    print("adversarial pairs ...", flush=True)
    adv = asyncio.run(adversarial(held_questions, embedder, work_dir, adversarial_seed, per_category))
    sizes = [int(x) for x in scales.split(",") if x]
    print("lookup latency at scale (synthetic vectors) ...", flush=True)
    asked = [j.query for j in test] + [p.b for p in held]
    scale_rows = asyncio.run(scale(sizes, stored_vecs, stored, asked, embedder, work_dir, queries))
    timings = scale_rows.pop()
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "judged_replay": rep, "adversarial": adv, "scale": scale_rows, "components": timings,
    }
    print()
    print(f"judged test replay: {rep['queries']} queries ({rep['answerable']} answerable), {rep['entries']} "
          f"entries; verifier threshold {rep['threshold']:.4f} (max_wrong_rate {rep['max_wrong_rate']})")
    print(md_table(("decider", "served", "precision", "recall of answerable"),
                   [(n, r["served"], r["precision"], r["recall_of_answerable"])
                    for n, r in rep["deciders"].items()]))
    print("served an entry other than the judged nearest (counted wrong): "
          + ", ".join(f"{n} {r['served_unjudged_entry']}" for n, r in rep["deciders"].items()))
    print(f"refusals of the nearest candidate (shipped): {rep['refusals_of_nearest']}")
    print()
    print(f"adversarial edits, seed {adv['seed']}:")
    print(md_table(("adversarial", "pairs", "served", "rate"),
                   [(c, r["pairs"], r["served"], r["served"] / r["pairs"]) for c, r in adv["categories"].items()]))
    print()
    print(f"{'entries':>10}{'build s':>9}{'search p50/p99 ms':>20}{'semantic p50/p99 ms':>22}"
          f"{'exact p50/p99 ms':>19}{'found':>7}{'file MB':>9}")
    for r in scale_rows:
        print(f"{r['entries']:>10,}{r['build_s']:>9.1f}{r['search_p50_ms']:>11.2f} /{r['search_p99_ms']:>6.2f}"
              f"{r['semantic_lookup_p50_ms']:>13.2f} /{r['semantic_lookup_p99_ms']:>6.2f}"
              f"{r['exact_lookup_p50_ms']:>10.2f} /{r['exact_lookup_p99_ms']:>6.2f}"
              f"{r['near_duplicate_found']:>7.2f}{r['file_mb']:>9.0f}")
    print(f"embedding p50/p99 {timings['embed_p50_ms']:.2f}/{timings['embed_p99_ms']:.2f} ms; "
          f"verifier (3 candidates, one run) p50/p99 {timings['verifier_p50_ms']:.2f}/{timings['verifier_p99_ms']:.2f} ms")
    write_result(out, result, work_dir)


if __name__ == "__main__":
    typer.run(main)
