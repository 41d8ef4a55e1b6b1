"""Replace the calibration-extra verdicts with the blind second reading (2026-11-25).

The first reading (kept as ``../agreement/calibration_extra_first_reading.jsonl``) was one session
that knew what the part is for; the second was five fresh reader sessions with only
``READER_BRIEF.md`` and a shard of ``{"id", "query", "stored"}`` (``READER_PROMPT.md``), the same
kind of reader as the judged set's test part. Only the readers' verdicts are copied.

    python data/judged/calibration_extra/apply_second_reading.py WORK_DIR
"""

import json
import sys
from pathlib import Path

if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
here = Path(__file__).resolve().parent
verdicts = {}
for path in sorted(src.glob("verdicts_*.jsonl")):
    for line in path.read_text().splitlines():
        v = json.loads(line)
        if not isinstance(v["servable"], bool):
            raise SystemExit(f"{v['id']}: servable must be true or false")
        verdicts[v["id"]] = v
first = here.parent / "agreement" / "calibration_extra_first_reading.jsonl"
rows = [json.loads(line) for line in first.read_text().splitlines() if line.strip()]
missing = [r["id"] for r in rows if r["id"] not in verdicts]
if missing:
    raise SystemExit(f"{len(missing)} pairs have no second-reading verdict, e.g. {missing[:3]}")
with (here / "calibration_extra.jsonl").open("w") as fh:
    for r in rows:
        v = verdicts[r["id"]]
        fh.write(json.dumps({**r, "servable": v["servable"], "why": v.get("why", "")}) + "\n")
print(f"wrote {len(rows)} pairs, {sum(verdicts[r['id']]['servable'] for r in rows)} servable")
