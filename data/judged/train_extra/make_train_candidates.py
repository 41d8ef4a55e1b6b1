"""Replay pairs from the TRAIN split (not held out) for a second judged part used only for training.

Same replay as the held-out one (make_candidates.py): a seeded sample of train pairs the size of the
held-out split; every sampled `a` stored, every sampled `b` asks; nearest stored question by cosine
over the shipped embedder, kept when >= 0.80 and not an exact-text hit. Pairs whose query or stored
text occurs anywhere in the existing judged set are dropped, so nothing here can leak into its
calibration or test parts.

    python data/judged/train_extra/make_train_candidates.py PAIRS OUT_DIR [N]

PAIRS: the QQP pairs JSONL (``{a, b, duplicate}``); OUT_DIR: the reading's working folder.
"""
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # candidates.py
from candidates import replay, write  # noqa: E402
from edge.cache import load_pairs, split_pairs  # noqa: E402
from edge.cache.keys import normalize_text  # noqa: E402

if len(sys.argv) not in (3, 4):
    raise SystemExit(__doc__)
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1600
SEED = 20261124
SH = 4
judged = [json.loads(l) for l in open(Path(__file__).resolve().parents[1] / "judged.jsonl")]
seen = {normalize_text(r["query"]).lower() for r in judged} | {normalize_text(r["stored"]).lower() for r in judged}
train, held = split_pairs(load_pairs(Path(sys.argv[1])))
train = list(train)
random.Random(SEED).shuffle(train)
rows = replay(train[: len(held)], "train sample", seen)
random.Random(SEED).shuffle(rows)
rows = rows[:N]
per = (len(rows) + SH - 1) // SH
write(Path(sys.argv[2]), rows, "t", per)
print(f"wrote {len(rows)} candidates in {SH} shards of {per}")
