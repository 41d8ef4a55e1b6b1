"""Join the train-split replay candidates with the readers' verdicts into ``train_extra.jsonl``.

Inputs (outside the repository): ``candidates.jsonl`` written by ``make_train_candidates.py``
(kept beside this file) and ``verdicts_{0..3}.jsonl``, one per reader session
(``{"id", "servable", "why"}``). Only complete shards (400 verdicts) are used; a pair without a
verdict is left out. Nothing here decides a verdict: it only copies the readers' ones.

    python data/judged/train_extra/make_train_extra.py WORK_DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # candidates.py
from candidates import join, read_rows  # noqa: E402

SHARD = 400
if len(sys.argv) != 2:
    raise SystemExit(__doc__)
src = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "train_extra.jsonl"
candidates = read_rows(src / "candidates.jsonl")
if not candidates:
    raise SystemExit(f"no candidates in {src}")
verdicts: dict[str, dict] = {}
for n in range(4):
    rows = read_rows(src / f"verdicts_{n}.jsonl")
    if len(rows) != SHARD:
        print(f"shard {n}: {len(rows)} verdicts, skipped")
        continue
    verdicts.update({r["id"]: r for r in rows})
kept = join(candidates, verdicts, out)
print(f"wrote {kept} judged train-extra pairs to {out}")
