"""Join the held-out replay candidates with the readers' verdicts into ``calibration_extra.jsonl``.

Inputs (outside the repository): ``candidates.jsonl`` and ``shard_{0..3}.jsonl`` written by
``make_all.py`` (kept beside this file, as run) and ``verdicts_{0..3}.jsonl``, one per reader
session (``{"id", "servable", "why"}``, one line per pair of its shard, in the shard's order).
A shard is used only when its verdict file is complete (as many lines as the shard, the same ids
in the same order); a pair without a verdict is left out. Nothing here decides a verdict: it only
copies the readers' ones.

    python data/judged/calibration_extra/make_calibration_extra.py WORK_DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # candidates.py
from candidates import join, read_rows  # noqa: E402

if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "calibration_extra.jsonl"
verdicts: dict[str, dict] = {}
for n in range(4):
    shard, got = read_rows(src / f"shard_{n}.jsonl"), read_rows(src / f"verdicts_{n}.jsonl")
    if [r["id"] for r in got] != [r["id"] for r in shard]:
        print(f"shard {n}: {len(got)} verdicts for {len(shard)} pairs (or ids out of order), skipped")
        continue
    verdicts.update({r["id"]: r for r in got})
kept = join(read_rows(src / "candidates.jsonl"), verdicts, out)
print(f"wrote {kept} judged calibration-extra pairs to {out}")
