"""Cross-validated choice of the error-budget rule, on calibration data only (docs/cache.md).

The judged calibration part plus ``calibration_extra/``, split into 5 folds per seeded
repetition; Platt scaling and the threshold fitted on 4 and applied to the fifth, per rule (an
upper confidence bound on the wrong rate at a confidence level; Wilson at 0.5 is the point
estimate). The test part is never read.

    python -m bench.cache_calibration_cv [--verifier-dir DIR] [--reps 20] [--no-extra]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from edge import CacheSettings, Embedder  # noqa: E402
from edge.cache import Verifier, load_judged  # noqa: E402
from edge.cache.calibration import sweep  # noqa: E402
from edge.cache.judged import calibration_items, load_calibration_extra  # noqa: E402
from router.training.verifier import cosines, score_replay  # noqa: E402
from edge.cache.verifier import fit_platt  # noqa: E402

RULES = "wilson:0.5,wilson:0.69,wilson:0.8413,wilson:0.9,wilson:0.95,clopper-pearson:0.5,clopper-pearson:0.8413,clopper-pearson:0.9,clopper-pearson:0.95"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verifier-dir", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--max-wrong-rate", type=float, default=0.05)
    ap.add_argument("--rules", default=RULES, help="bound:confidence, comma-separated")
    ap.add_argument("--no-extra", action="store_true", help="the judged calibration part alone")
    args = ap.parse_args()
    settings = CacheSettings()
    verifier = Verifier.load(args.verifier_dir) if args.verifier_dir else Verifier.shipped()
    items = calibration_items(load_judged(), [] if args.no_extra else load_calibration_extra())
    cos = cosines(Embedder.load(settings), [(j.query, j.stored) for j in items])
    scores = score_replay(items, verifier, settings, cos)
    seen = ~np.isnan(scores.logits)
    y = scores.servable
    budget = 1.0 - args.max_wrong_rate
    print(f"calibration data: {len(items)} pairs, {int(y.sum())} servable, {int(seen.sum())} reach the verifier "
          f"({int((y & ~seen).sum())} servable refused by the floor or a guard); {args.reps} x 5-fold, "
          f"budget: wrong at most {args.max_wrong_rate}")
    print(f"| {'rule':<22} | {'folds meeting':>13} | {'served/pass':>11} | {'precision (range)':>22} | {'recall':>6} |")
    for rule in args.rules.split(","):
        bound, level = rule.split(":")
        confidence = float(level)
        served = right = met = folds = 0
        per_rep = []
        for rep in range(args.reps):
            rng = np.random.default_rng(rep)
            fold = rng.permutation(len(items)) % 5
            s_rep = r_rep = 0
            for k in range(5):
                fit, held = fold != k, fold == k
                platt = fit_platt(scores.logits[fit & seen], y[fit & seen], scores.cosines[fit & seen])
                prob = np.where(seen, platt(np.nan_to_num(scores.logits), scores.cosines), -1.0)
                point = sweep(prob[fit], y[fit], budget, confidence=confidence, bound=bound)  # type: ignore[arg-type]
                folds += 1
                if point.threshold is None:
                    met += 1  # serving nothing is never wrong
                    continue
                take = held & (prob >= point.threshold)
                s_fold, r_fold = int(take.sum()), int((take & y).sum())
                met += s_fold == 0 or r_fold / s_fold >= budget
                s_rep += s_fold
                r_rep += r_fold
            served += s_rep
            right += r_rep
            per_rep.append(r_rep / max(s_rep, 1))
        print(f"| {rule:<22} | {met / folds:>13.2f} | {served / args.reps:>11.1f} | "
              f"{right / max(served, 1):.3f} ({min(per_rep):.3f}..{max(per_rep):.3f}) | "
              f"{right / args.reps / y.sum():>6.3f} |", flush=True)


if __name__ == "__main__":
    main()
