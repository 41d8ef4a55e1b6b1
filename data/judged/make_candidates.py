"""Sample (query, nearest stored question) replay pairs above the cosine floor for judging.

The replay is the one bench.cache runs: every held-out `a` is stored, every held-out `b` asks.
For each distinct query, the nearest stored question (exact cosine over the shipped INT8 ONNX
all-MiniLM-L6-v2 embeddings of the text the cache embeds) is kept when its cosine is >= 0.80
and its normalized text differs from the query's (an identical text is an exact-cache hit).
A seeded random sample of those pairs is written for reading.

    python data/judged/make_candidates.py PAIRS OUT_DIR [N]

PAIRS: the QQP pairs JSONL (``{a, b, duplicate}``); OUT_DIR: the reading's working folder.
"""
import random
import sys
from pathlib import Path

from candidates import replay, write
from edge.cache import load_pairs, split_pairs

if len(sys.argv) not in (3, 4):
    raise SystemExit(__doc__)
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
SEED = 20261123
SH = 5
_, held = split_pairs(load_pairs(Path(sys.argv[1])))
rows = replay(held, "held-out pairs")
random.Random(SEED).shuffle(rows)
rows = rows[:N]
per = (len(rows) + SH - 1) // SH
write(Path(sys.argv[2]), rows, "j", per)
print(f"wrote {len(rows)} candidates in {SH} shards of {per}")
