"""Join the candidates with the readers' verdicts into unseen_qqp.jsonl (complete shards only).

    python data/judged/unseen_qqp/join.py WORK_DIR
"""
import json, sys
from pathlib import Path

work = Path(sys.argv[1])
cands = {json.loads(l)["id"]: json.loads(l) for l in (work / "candidates.jsonl").open()}
rows = []
for shard in sorted(work.glob("shard_*.jsonl")):
    ids = [json.loads(l)["id"] for l in shard.open()]
    verdicts = work / shard.name.replace("shard_", "verdicts_")
    got = [json.loads(l) for l in verdicts.open()] if verdicts.is_file() else []
    if [v["id"] for v in got] != ids:
        raise SystemExit(f"{verdicts}: not the shard's ids in order")
    rows += [{**cands[v["id"]], "servable": bool(v["servable"]), "why": v["why"]} for v in got]
out = Path(__file__).resolve().parent / "unseen_qqp.jsonl"
with out.open("w") as fh:
    for r in sorted(rows, key=lambda r: r["id"]):
        fh.write(json.dumps(r) + "\n")
print(f"{len(rows)} pairs, {sum(r['servable'] for r in rows)} servable -> {out}")
