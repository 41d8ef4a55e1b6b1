"""Join the train-split replay candidates with the readers' verdicts into ``train_extra.jsonl``.

Inputs (outside the repository): ``candidates.jsonl`` written by ``make_train_candidates.py``
(kept beside this file) and ``verdicts_{0..3}.jsonl``, one per reader session
(``{"id", "servable", "why"}``). Only complete shards (400 verdicts) are used; a pair without a
verdict is left out. Nothing here decides a verdict: it only copies the readers' ones.

    python data/judged/train_extra/make_train_extra.py WORK_DIR
"""

import json
import sys
from pathlib import Path

SHARD = 400
if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "train_extra.jsonl"
candidates = [json.loads(line) for line in (src / "candidates.jsonl").read_text().splitlines() if line.strip()]
verdicts: dict[str, dict] = {}
for n in range(4):
    path = src / f"verdicts_{n}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if len(rows) != SHARD:
        print(f"shard {n}: {len(rows)} verdicts, skipped")
        continue
    verdicts.update({r["id"]: r for r in rows})
kept = 0
with out.open("w") as fh:
    for c in candidates:
        v = verdicts.get(c["id"])
        if v is None:
            continue
        if not isinstance(v["servable"], bool):
            raise SystemExit(f"{c['id']}: servable must be true or false")
        fh.write(json.dumps({**c, "servable": v["servable"], "why": v.get("why", "")}) + "\n")
        kept += 1
print(f"wrote {kept} judged train-extra pairs to {out}")
