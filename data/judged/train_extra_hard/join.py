"""Join the mined candidates with the readers' verdicts into ``train_extra_hard.jsonl`` (complete
shards only; nothing here decides a verdict).

    python data/judged/train_extra_hard/join.py WORK_DIR
"""
import sys
import json
from pathlib import Path
if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "train_extra_hard.jsonl"
cands = {json.loads(l)["id"]: json.loads(l) for l in (src / "candidates.jsonl").read_text().splitlines()}
n = 0
with out.open("w") as fh:
    for s in range(8):
        ids = [json.loads(l)["id"] for l in (src / f"shard_{s}.jsonl").read_text().splitlines()]
        vp = src / f"verdicts_{s}.jsonl"
        v = [json.loads(l) for l in vp.read_text().splitlines() if l.strip()] if vp.exists() else []
        if [x["id"] for x in v] != ids:
            print("shard", s, "incomplete", len(v)); continue
        for x in v:
            assert isinstance(x["servable"], bool)
            c = cands[x["id"]]
            fh.write(json.dumps({k: c[k] for k in ("id", "query", "stored", "cosine", "label")} | {"p": c["p"], "servable": x["servable"], "why": x.get("why", "")}) + "\n"); n += 1
print("joined", n)
