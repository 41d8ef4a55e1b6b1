"""Replay pairs from the TRAIN split (not held out) for a second judged part used only for training.

Same replay as the held-out one (make_candidates.py): a seeded sample of train pairs the size of the
held-out split; every sampled `a` stored, every sampled `b` asks; nearest stored question by cosine
over the shipped embedder, kept when >= 0.80 and not an exact-text hit. Pairs whose query or stored
text occurs anywhere in the existing judged set are dropped, so nothing here can leak into its
calibration or test parts.

    python data/judged/train_extra/make_train_candidates.py PAIRS OUT_DIR [N]

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
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1600
SEED = 20261124
out = Path(sys.argv[2])
judged = [json.loads(l) for l in open(Path(__file__).resolve().parents[1] / "judged.jsonl")]
seen = {normalize_text(r["query"]).lower() for r in judged} | {normalize_text(r["stored"]).lower() for r in judged}
pairs = load_pairs(Path(sys.argv[1]))
train, held = split_pairs(pairs)
train = list(train)
random.Random(SEED).shuffle(train)
train = train[: len(held)]
label = {(normalize_text(p.b), normalize_text(p.a)): p.duplicate for p in train}
stored = list(dict.fromkeys(normalize_text(p.a) for p in train))
queries = list(dict.fromkeys(normalize_text(p.b) for p in train))
emb = Embedder.load(CacheSettings())
def embed(texts):
    return np.concatenate([emb.embed_batch(texts[i:i + 64]) for i in range(0, len(texts), 64)])
S = embed(stored); Q = embed(queries)
rows = []
for start in range(0, len(queries), 1024):
    sims = Q[start:start + 1024] @ S.T
    for j, row in enumerate(sims):
        q = queries[start + j]
        for k in np.argsort(-row)[:3]:
            if stored[k].lower() == q.lower():
                continue
            if row[k] >= FLOOR and q.lower() not in seen and stored[k].lower() not in seen:
                rows.append({"query": q, "stored": stored[k], "cosine": round(float(row[k]), 4),
                             "label": label.get((q, stored[k]))})
            break
print(f"train sample {len(train)}, stored {len(stored)}, queries {len(queries)}, above floor {len(rows)}")
random.Random(SEED).shuffle(rows)
rows = rows[:N]
for i, r in enumerate(rows):
    r["id"] = f"t{i:04d}"
with (out / "candidates.jsonl").open("w") as fh:
    for r in rows:
        fh.write(json.dumps({"id": r["id"], **{k: r[k] for k in ("query", "stored", "cosine", "label")}}) + "\n")
SH = 4
per = (len(rows) + SH - 1) // SH
for s in range(SH):
    with (out / f"shard_{s}.jsonl").open("w") as fh:
        for r in rows[s * per:(s + 1) * per]:
            fh.write(json.dumps({"id": r["id"], "query": r["query"], "stored": r["stored"]}) + "\n")
print(f"wrote {len(rows)} candidates in {SH} shards of {per}")
