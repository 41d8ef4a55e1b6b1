"""Join the later train-split replays' candidates with the readers' verdicts into ``train_extra_2.jsonl``.

Inputs (outside the repository): ``slice_{1,2,3}/candidates.jsonl`` written by
``make_train_candidates.py`` (kept beside this file) and ``slice_k/verdicts_{n}.jsonl``, one per
reader session (``{"id", "servable", "why"}``). Only complete shards are used (every id of the shard
answered, in order); a pair without a verdict is left out. Nothing here decides a verdict: it only
copies the readers' ones.

    python data/judged/train_extra_2/make_train_extra.py WORK_DIR
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # candidates.py
from candidates import read_rows as rows  # noqa: E402

if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "train_extra_2.jsonl"
kept = 0
with out.open("w") as fh:
    for k in (1, 2, 3):
        folder = src / f"slice_{k}"
        candidates = {c["id"]: c for c in rows(folder / "candidates.jsonl")}
        for shard in sorted(folder.glob("shard_*.jsonl")):
            ids = [r["id"] for r in rows(shard)]
            verdicts = rows(folder / shard.name.replace("shard_", "verdicts_"))
            if [v["id"] for v in verdicts] != ids:
                print(f"slice {k} {shard.name}: {len(verdicts)} verdicts for {len(ids)} pairs, skipped")
                continue
            for v in verdicts:
                if not isinstance(v["servable"], bool):
                    raise SystemExit(f"{v['id']}: servable must be true or false")
                fh.write(json.dumps({**candidates[v["id"]], "servable": v["servable"], "why": v.get("why", "")}) + "\n")
                kept += 1
print(f"wrote {kept} judged train-extra pairs to {out}")
