"""A QQP sample outside every judged set, replayed as a client would meet it, for reading.

A seeded sample (seed 20261127; N pairs, 2,500 unless given) of the train-split QQP pairs whose two questions occur in no
judged file (data/judged/**/*.jsonl) and no bench data file. Every sampled ``a`` is stored, every
sampled ``b`` asks through the real cache (EdgeCache.candidates, shipped embedder and index): each
candidate the semantic layer returns (up to ``cache.candidates`` nearest above the floor, whatever
the guards or verifier say) becomes a (query, stored) pair to read. A query whose text equals a
stored question is an exact hit and is not read.

    python data/judged/unseen_qqp/make_candidates.py PAIRS WORK_DIR [N]

Run as ``... PAIRS WORK_DIR 20000`` (every fresh pair: 17,556). Writes sample_lines.txt beside this
script, WORK_DIR/candidates.jsonl (with cosine and QQP label, for joining later) and
WORK_DIR/shard_S.jsonl (id, query, stored only: what a reader sees).
"""
import asyncio, json, random, sys, tempfile, time
from pathlib import Path

from bench.cache import embed_texts, entry, key
from edge import CacheSettings, EdgeCache, Embedder
from edge.cache import load_pairs, split_pairs
from edge.cache.keys import normalize_text

SEED, SHARD = 20261127, 400
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2500
if len(sys.argv) not in (3, 4):
    raise SystemExit(__doc__)
here = Path(__file__).resolve()
repo = here.parents[3]
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)


def texts_of(path: Path) -> set[str]:
    seen: set[str] = set()
    for line in path.open(encoding="utf-8"):
        if line.strip():
            row = json.loads(line)
            for field in ("query", "stored", "a", "b", "q", "e"):
                if isinstance(row.get(field), str):
                    seen.add(normalize_text(row[field]).lower())
    return seen


seen: set[str] = set()
for path in [*(repo / "data" / "judged").rglob("*.jsonl"), *(repo / "bench" / "data").rglob("*.jsonl")]:
    if path.parent.name != "unseen_qqp":
        seen |= texts_of(path)
all_pairs = load_pairs(Path(sys.argv[1]))
train, _ = split_pairs(all_pairs)
fresh = [p for p in train if normalize_text(p.a).lower() not in seen and normalize_text(p.b).lower() not in seen]
random.Random(SEED).shuffle(fresh)
sample = fresh[:N]
# The sample's line numbers in PAIRS (ascending; the bench shuffles them with SEED again), so the
# replay can be rebuilt whatever judged files are added later.
line_of = {id(p): i for i, p in enumerate(all_pairs)}
(here.parent / "sample_lines.txt").write_text("".join(f"{n}\n" for n in sorted(line_of[id(p)] for p in sample)))
label = {(normalize_text(p.b), normalize_text(p.a)): p.duplicate for p in sample}
stored = list(dict.fromkeys(normalize_text(p.a) for p in sample))
queries = list(dict.fromkeys(normalize_text(p.b) for p in sample))
lower = {s.lower() for s in stored}


async def main() -> list[dict]:
    embedder = Embedder.load(CacheSettings())
    with tempfile.TemporaryDirectory() as tmp:
        cache = EdgeCache(Path(tmp) / "c.db", CacheSettings(verifier_threshold=0.0), embedder=embedder)
        cache.db.put_bulk([entry(t, str(i)) for i, t in enumerate(stored)], embed_texts(embedder, stored), now=time.time())
        rows = []
        for start in range(0, len(queries), 32):
            chunk = [q for q in queries[start:start + 32] if q.lower() not in lower]
            for q, (_, cands) in zip(chunk, await asyncio.gather(*(cache.candidates(key(q)) for q in chunk)), strict=True):
                for c in cands:
                    rows.append({"query": q, "stored": c.entry.prompt_text, "cosine": round(float(c.similarity), 4),
                                 "label": label.get((q, c.entry.prompt_text))})
        await cache.aclose()
    return rows


rows = asyncio.run(main())
exact = sum(q.lower() in lower for q in queries)
print(f"fresh train pairs {len(fresh)}, sample {len(sample)}, stored {len(stored)}, queries {len(queries)}, "
      f"exact {exact}, pairs to read {len(rows)} ({len({r['query'] for r in rows})} queries)")
random.Random(SEED).shuffle(rows)
for i, r in enumerate(rows):
    r["id"] = f"u{i:04d}"
with (out / "candidates.jsonl").open("w") as fh:
    for r in rows:
        fh.write(json.dumps({"id": r["id"], **{k: r[k] for k in ("query", "stored", "cosine", "label")}}) + "\n")
for s in range(0, len(rows), SHARD):
    with (out / f"shard_{s // SHARD}.jsonl").open("w") as fh:
        for r in rows[s:s + SHARD]:
            fh.write(json.dumps({"id": r["id"], "query": r["query"], "stored": r["stored"]}) + "\n")
print(f"wrote {len(rows)} pairs in {(len(rows) + SHARD - 1) // SHARD} shards")
