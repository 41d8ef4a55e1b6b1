"""Join the held-out replay candidates with the readers' verdicts into ``calibration_extra.jsonl``.

Inputs (outside the repository): ``candidates.jsonl`` and ``shard_{0..3}.jsonl`` written by
``make_all.py`` (kept beside this file, as run) and ``verdicts_{0..3}.jsonl``, one per reader
session (``{"id", "servable", "why"}``, one line per pair of its shard, in the shard's order).
A shard is used only when its verdict file is complete (as many lines as the shard, the same ids
in the same order); a pair without a verdict is left out. Nothing here decides a verdict: it only
copies the readers' ones.

    python data/judged/calibration_extra/make_calibration_extra.py WORK_DIR
"""

import json
import sys
from pathlib import Path


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "calibration_extra.jsonl"
candidates = rows(src / "candidates.jsonl")
verdicts: dict[str, dict] = {}
for n in range(4):
    shard, got = rows(src / f"shard_{n}.jsonl"), rows(src / f"verdicts_{n}.jsonl")
    if [r["id"] for r in got] != [r["id"] for r in shard]:
        print(f"shard {n}: {len(got)} verdicts for {len(shard)} pairs (or ids out of order), skipped")
        continue
    verdicts.update({r["id"]: r for r in got})
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
print(f"wrote {kept} judged calibration-extra pairs to {out}")
