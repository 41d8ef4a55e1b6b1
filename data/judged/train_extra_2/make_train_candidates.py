"""More train-split replays for training-only judged pairs (``train_extra_2.jsonl``).

Same replay as ``../train_extra/make_train_candidates.py`` on the *next* slices of the same seeded shuffle of QQP's
train split (slice k = pairs k*len(held)..(k+1)*len(held), k = 1, 2, 3), so no sampled pair repeats
the first train replay: every sampled `a` stored, every sampled `b` asks; nearest stored question by
cosine over the shipped embedder, kept when >= 0.80 and not an exact-text hit. Pairs whose query or
stored text occurs anywhere in the judged set, the calibration-extra part, the first train-extra
part or an earlier slice's sample are dropped, so nothing here can leak into the calibration or test
parts. Slice k's candidates get ids u/v/w + number and go to OUT_DIR/slice_k/ in shards of 300.

    python data/judged/train_extra_2/make_train_candidates.py PAIRS OUT_DIR [N]

PAIRS: the QQP pairs JSONL (``{a, b, duplicate}``).
"""
import json
import random
import sys
from pathlib import Path

import numpy as np

from edge import CacheSettings, Embedder
from edge.cache import load_pairs, split_pairs
from edge.cache.pairs import nearest_stored
from edge.cache.keys import normalize_text

FLOOR = 0.80
if len(sys.argv) not in (3, 4):
    raise SystemExit(__doc__)
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2400
out = Path(sys.argv[2])
SEED = 20261124  # the first train replay's shuffle; this one takes the slice after it
SHARDS = 8
here = Path(__file__).resolve().parent
seen: set[str] = set()
for path in (here.parent / "judged.jsonl", here.parent / "train_extra" / "train_extra.jsonl",
             here.parent / "calibration_extra" / "calibration_extra.jsonl"):
    for line in path.read_text().splitlines():
        r = json.loads(line)
        seen |= {normalize_text(r["query"]).lower(), normalize_text(r["stored"]).lower()}
pairs = load_pairs(Path(sys.argv[1]))
train, held = split_pairs(pairs)
train = list(train)
random.Random(SEED).shuffle(train)
emb = Embedder.load(CacheSettings())


def embed(texts: list[str]) -> np.ndarray:
    return np.concatenate([emb.embed_batch(texts[i : i + 64]) for i in range(0, len(texts), 64)])


def replay(train: list) -> list[dict]:
    label = {(normalize_text(p.b), normalize_text(p.a)): p.duplicate for p in train}
    stored = list(dict.fromkeys(normalize_text(p.a) for p in train))
    queries = list(dict.fromkeys(normalize_text(p.b) for p in train))
    S, Q = embed(stored), embed(queries)
    rows = [
        {"query": queries[i], "stored": stored[k], "cosine": round(cos, 4), "label": label.get((queries[i], stored[k]))}
        for i, k, cos in nearest_stored(queries, stored, Q, S, FLOOR)
        if queries[i].lower() not in seen and stored[k].lower() not in seen
    ]
    print(f"train slice {len(train)}, stored {len(stored)}, queries {len(queries)}, above floor {len(rows)}")
    return rows


for k, prefix in ((1, "u"), (2, "v"), (3, "w")):
    rows = replay(train[k * len(held) : (k + 1) * len(held)])
    random.Random(SEED + k).shuffle(rows)
    rows = rows[:N]
    seen |= {r["query"].lower() for r in rows} | {r["stored"].lower() for r in rows}
    dest = out / f"slice_{k}"
    dest.mkdir(parents=True, exist_ok=True)
    with (dest / "candidates.jsonl").open("w") as fh:
        for i, r in enumerate(rows):
            fh.write(json.dumps({"id": f"{prefix}{i:04d}", **r}) + "\n")
    shards = (len(rows) + 299) // 300
    for s in range(shards):
        with (dest / f"shard_{s}.jsonl").open("w") as fh:
            for i, r in enumerate(rows[s * 300 : (s + 1) * 300], s * 300):
                fh.write(json.dumps({"id": f"{prefix}{i:04d}", "query": r["query"], "stored": r["stored"]}) + "\n")
    print(f"slice {k}: wrote {len(rows)} candidates in {shards} shards to {dest}")
