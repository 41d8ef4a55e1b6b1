"""Cross-validated check of the calibration rule on the judged *calibration* part only.

For each repetition (seeded) the calibration part is split into 5 folds; Platt scaling and the
threshold are fitted on 4 and applied to the fifth. Out-of-fold served hits are pooled per rule:
the Wilson bound at several z (z = 0: the point estimate). The test part is never read.

    python -m bench.cache_calibration_cv [--verifier-dir DIR] [--reps 20]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from edge import CacheSettings, Embedder  # noqa: E402
from edge.cache import Verifier, load_judged, split_judged  # noqa: E402
from edge.cache.calibration import sweep  # noqa: E402
from edge.cache.training import cosines, score_replay  # noqa: E402
from edge.cache.verifier import fit_platt  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verifier-dir", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--max-wrong-rate", type=float, default=0.05)
    ap.add_argument("--z", default="0,0.5,1,1.5")
    args = ap.parse_args()
    settings = CacheSettings()
    verifier = Verifier.load(args.verifier_dir) if args.verifier_dir else Verifier.shipped()
    items = split_judged(load_judged())["calibration"]
    cos = cosines(Embedder.load(settings), [(j.query, j.stored) for j in items])
    scores = score_replay(items, verifier, settings, cos)
    seen = ~np.isnan(scores.logits)
    y = scores.servable
    print(f"calibration part: {len(items)} pairs, {int(y.sum())} servable, {int(seen.sum())} reach the verifier "
          f"({int((y & ~seen).sum())} servable refused by the floor or a guard)")
    for z in (float(v) for v in args.z.split(",")):
        served = right = 0
        per_rep = []
        for rep in range(args.reps):
            rng = np.random.default_rng(rep)
            fold = rng.permutation(len(items)) % 5
            s_rep = r_rep = 0
            for k in range(5):
                fit, held = fold != k, fold == k
                platt = fit_platt(scores.logits[fit & seen], y[fit & seen], scores.cosines[fit & seen])
                prob = np.where(seen, platt(np.nan_to_num(scores.logits), scores.cosines), -1.0)
                point = sweep(prob[fit], y[fit], 1.0 - args.max_wrong_rate, z=z)
                if point.threshold is None:
                    continue
                take = held & (prob >= point.threshold)
                s_rep += int(take.sum())
                r_rep += int((take & y).sum())
            served += s_rep
            right += r_rep
            per_rep.append(r_rep / max(s_rep, 1))
        print(f"z={z:<4} out-of-fold served {served / args.reps:6.1f} per pass, precision {right / max(served, 1):.3f} "
              f"(per pass {min(per_rep):.3f}..{max(per_rep):.3f}), recall of answerable {right / args.reps / y.sum():.3f}")


if __name__ == "__main__":
    main()
