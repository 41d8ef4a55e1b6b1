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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # candidates.py
from candidates import replay, write  # noqa: E402
from edge.cache import load_pairs, split_pairs  # noqa: E402
from edge.cache.keys import normalize_text  # noqa: E402

if len(sys.argv) not in (3, 4):
    raise SystemExit(__doc__)
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2400
out = Path(sys.argv[2])
SEED = 20261124  # the first train replay's shuffle; this one takes the slice after it
here = Path(__file__).resolve().parent
seen: set[str] = set()
for path in (here.parent / "judged.jsonl", here.parent / "train_extra" / "train_extra.jsonl",
             here.parent / "calibration_extra" / "calibration_extra.jsonl"):
    for line in path.read_text().splitlines():
        r = json.loads(line)
        seen |= {normalize_text(r["query"]).lower(), normalize_text(r["stored"]).lower()}
train, held = split_pairs(load_pairs(Path(sys.argv[1])))
train = list(train)
random.Random(SEED).shuffle(train)
for k, prefix in ((1, "u"), (2, "v"), (3, "w")):
    rows = replay(train[k * len(held) : (k + 1) * len(held)], "train slice", seen)
    random.Random(SEED + k).shuffle(rows)
    rows = rows[:N]
    seen |= {r["query"].lower() for r in rows} | {r["stored"].lower() for r in rows}
    shards = write(out / f"slice_{k}", rows, prefix, 300)
    print(f"slice {k}: wrote {len(rows)} candidates in {shards} shards to {out / f'slice_{k}'}")
