"""Hard-region pairs from the whole train split (stop 22): the nearest stored question across all of
QQP's train-split `a` texts for each train-split `b`, scored by the shipped verifier (stop 21's
model, stop 22's calibration); a seeded sample of 2,400 of those it scores >= 0.6 (it serves from
0.8788). Pairs already judged, or sharing a text with the judged set or calibration-extra, are
dropped. Readers saw only ``{"id", "query", "stored"}``; ``candidates.jsonl`` keeps ``p``.

    python data/judged/train_extra_hard/mine.py PAIRS OUT_DIR

PAIRS: the QQP pairs JSONL (``{a, b, duplicate}``).
"""
import json, random, sys
from pathlib import Path
import numpy as np
from edge import CacheSettings, Embedder
from edge.cache import load_pairs, split_pairs, Verifier
from edge.cache.judged import nearest_stored
from edge.cache.keys import normalize_text
from edge.cache.judged import Judged, load_judged, load_train_extra, load_calibration_extra
from router.training.verifier import score_replay
FLOOR = 0.80; N = 2400; SEED = 20261126
if len(sys.argv) != 3:
    raise SystemExit(__doc__)
jd = Path(__file__).resolve().parents[1]
seen_pairs = set(); block = set()
for j in [*load_judged(), *load_calibration_extra()]:
    block |= {j.query.lower(), j.stored.lower()}
for j in [*load_train_extra(), *load_train_extra(jd / "train_extra_2")]:
    seen_pairs.add((j.query.lower(), j.stored.lower()))
train, held = split_pairs(load_pairs(Path(sys.argv[1])))
stored = list(dict.fromkeys(normalize_text(p.a) for p in train))
queries = list(dict.fromkeys(normalize_text(p.b) for p in train))
emb = Embedder.load(CacheSettings())
def embed(t): return np.concatenate([emb.embed_batch(t[i:i + 64]) for i in range(0, len(t), 64)])
S, Q = embed(stored), embed(queries)
rows = [(queries[i], stored[k], cos) for i, k, cos in nearest_stored(queries, stored, Q, S, FLOOR)
        if not {queries[i].lower(), stored[k].lower()} & block and (queries[i].lower(), stored[k].lower()) not in seen_pairs]
print("candidates above floor, unjudged", len(rows), flush=True)
v = Verifier.shipped()
items = [Judged(id=str(i), query=q, stored=s, cosine=c, servable=False, qqp_label=None) for i, (q, s, c) in enumerate(rows)]
sc = score_replay(items, v, CacheSettings(), np.array([c for _, _, c in rows]))
p = sc.replay(v.platt).scores
hard = [i for i in range(len(rows)) if p[i] >= 0.6]
print("scored >= 0.6:", len(hard), ">= threshold", int((p >= 0.8788).sum()), flush=True)
random.Random(SEED).shuffle(hard)
hard = hard[:N]
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
with (out / "candidates.jsonl").open("w") as fh:
    for n, i in enumerate(hard):
        fh.write(json.dumps({"id": f"h{n:04d}", "query": rows[i][0], "stored": rows[i][1], "cosine": round(rows[i][2], 4), "label": None, "p": round(float(p[i]), 4)}) + "\n")
per = 300
for s in range((len(hard) + per - 1) // per):
    with (out / f"shard_{s}.jsonl").open("w") as fh:
        for n, i in list(enumerate(hard))[s * per:(s + 1) * per]:
            fh.write(json.dumps({"id": f"h{n:04d}", "query": rows[i][0], "stored": rows[i][1]}) + "\n")
print("wrote", len(hard))
