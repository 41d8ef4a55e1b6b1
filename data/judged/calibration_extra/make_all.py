"""Sample (query, nearest stored question) replay pairs above the cosine floor for judging.

The replay is the one bench.cache runs: every held-out `a` is stored, every held-out `b` asks.
For each distinct query, the nearest stored question (exact cosine over the shipped INT8 ONNX
all-MiniLM-L6-v2 embeddings of the text the cache embeds) is kept when its cosine is >= 0.80
and its normalized text differs from the query's (an identical text is an exact-cache hit).
A seeded random sample of those pairs is written for reading.

    python data/judged/calibration_extra/make_all.py PAIRS OUT_DIR [N]

PAIRS: the QQP pairs JSONL (``{a, b, duplicate}``); OUT_DIR: the reading's working folder.
"""
import json, random, sys
from pathlib import Path
import numpy as np
from edge import CacheSettings, Embedder
from edge.cache import load_pairs, split_pairs
from edge.cache.keys import normalize_text

FLOOR = 0.80
if len(sys.argv) not in (3, 4):
    raise SystemExit(__doc__)
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
SEED = 20261123
out = Path(sys.argv[2])
pairs = load_pairs(Path(sys.argv[1]))
_, held = split_pairs(pairs)
label = {}
for p in held:
    label[(normalize_text(p.b), normalize_text(p.a))] = p.duplicate
stored = list(dict.fromkeys(normalize_text(p.a) for p in held))
queries = list(dict.fromkeys(normalize_text(p.b) for p in held))
emb = Embedder.load(CacheSettings())
def embed(texts):
    return np.concatenate([emb.embed_batch(texts[i:i + 64]) for i in range(0, len(texts), 64)])
S = embed(stored); Q = embed(queries)
rows = []
for start in range(0, len(queries), 1024):
    sims = Q[start:start + 1024] @ S.T
    for j, row in enumerate(sims):
        q = queries[start + j]
        order = np.argsort(-row)
        for k in order[:3]:
            if stored[k].lower() == q.lower():
                continue
            if row[k] >= FLOOR:
                rows.append({"query": q, "stored": stored[k], "cosine": round(float(row[k]), 4),
                             "label": label.get((q, stored[k]))})
            break
print(f"held-out pairs {len(held)}, stored {len(stored)}, queries {len(queries)}, above floor {len(rows)}")
random.Random(SEED).shuffle(rows)
import json as _j
old=[_j.loads(l) for l in open(Path(__file__).resolve().parents[1] / "judged.jsonl")]
oldq={o["query"] for o in old}
rest=[r for r in rows if r["query"] not in oldq]
print("above floor", len(rows), "not judged before", len(rest))
for i,r in enumerate(rest): r["id"]=f"c{i:04d}"
with (out/"candidates.jsonl").open("w") as fh:
    for r in rest: fh.write(json.dumps({"id": r["id"], **{k: r[k] for k in ("query","stored","cosine","label")}})+"\n")
SH=4; per=(len(rest)+SH-1)//SH
for s_ in range(SH):
    with (out/f"shard_{s_}.jsonl").open("w") as fh:
        for r in rest[s_*per:(s_+1)*per]: fh.write(json.dumps({"id": r["id"], "query": r["query"], "stored": r["stored"]})+"\n")
print("shards of", per)
