"""Routing benchmark: per-policy accuracy, cloud share and decision latency on the held-out split, and
how well a calibrated threshold hits its target share on prompts it was not calibrated on.

    HF_HUB_OFFLINE=1 python bench/bench_routing.py [--repeats 50] [--json-out FILE]

Prints a table, then the same numbers as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import write_json  # noqa: E402
from router.policy import PrivacyDetector, RoutingSettings, build_policy, load_classifier  # noqa: E402
from router.training.calibrate import threshold_for_share  # noqa: E402
from router.training.dataset import load_prompts, select  # noqa: E402
from router.training.embed import count_tokens, embed_texts  # noqa: E402
from router.training.evaluate import evaluate  # noqa: E402

SHARES = (0.2, 0.3, 0.5, 0.7)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50, help="timing passes over the held-out prompts")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args()

    prompts = load_prompts()
    train, test = select(prompts, "train"), select(prompts, "test")
    texts = [p.text for p in test]
    clf = load_classifier()

    embed_texts(["warm-up: load the model before timing"])
    t0 = time.perf_counter()
    x = embed_texts(texts)
    batch_ms = (time.perf_counter() - t0) * 1000 / len(test)
    single = []
    for text in texts[:30]:
        t0 = time.perf_counter()
        embed_texts([text])
        single.append((time.perf_counter() - t0) * 1000)
    tokens = count_tokens(texts)

    rows = []
    for name in ("length", "complexity", "hybrid"):
        routing = RoutingSettings(policy=name)
        policy = build_policy(routing)
        report = evaluate(test, x, tokens, clf, policy, threshold=0.5, repeats=args.repeats,
                          privacy=PrivacyDetector.from_settings(routing))
        rows.append({"policy": name, "accuracy": report.accuracy, "cloud_share": report.cloud_share,
                     "decision_us_p50": report.decision_us_p50, "decision_us_p95": report.decision_us_p95,
                     "samples": report.decision_samples})

    # Calibrate on one half of the held-out split and measure on the other (and the reverse): the
    # train split's scores are overconfident because the classifier was fit on them.
    scores = clf.score_batch(x)
    truth = np.array([p.label == "cloud" for p in test])
    half = np.array([hashlib.sha256(t.encode()).digest()[-1] % 2 == 0 for t in texts])
    calibration = []
    for share in SHARES:
        thresholds, shares, accs = [], [], []
        for fit_on in (half, ~half):
            cal = threshold_for_share(scores[fit_on].tolist(), share)
            routed = scores[~fit_on] >= cal.threshold
            thresholds.append(cal.threshold)
            shares.append(float(routed.mean()))
            accs.append(float((routed == truth[~fit_on]).mean()))
        calibration.append({"target_share": share, "threshold_mean": round(statistics.fmean(thresholds), 4),
                            "other_half_share": round(statistics.fmean(shares), 4),
                            "other_half_accuracy": round(statistics.fmean(accs), 4)})

    print(f"held-out split: {len(test)} prompts ({int(truth.sum())} labeled cloud); "
          f"train split: {len(train)}")
    print(f"embedding (sentence-transformers, torch CPU): batched {batch_ms:.2f} ms/prompt, "
          f"single p50 {statistics.median(single):.2f} ms (not part of the decision latency below)")
    print(f"\n{'policy':<12}{'accuracy':>10}{'cloud share':>13}{'decision p50':>15}{'decision p95':>15}")
    for r in rows:
        print(f"{r['policy']:<12}{r['accuracy']:>10.3f}{r['cloud_share']:>13.1%}"
              f"{r['decision_us_p50'] / 1000:>12.4f} ms{r['decision_us_p95'] / 1000:>12.4f} ms")
    print("\ncalibration (fit on one half of the held-out split, measured on the other; mean of both ways)")
    print(f"{'target share':<14}{'threshold':>10}{'share on other half':>21}{'accuracy':>10}")
    for c in calibration:
        print(f"{c['target_share']:<14.0%}{c['threshold_mean']:>10.4f}{c['other_half_share']:>21.1%}"
              f"{c['other_half_accuracy']:>10.3f}")
    result = {"held_out": len(test), "train": len(train), "embed_ms_batched": round(batch_ms, 3),
              "embed_ms_single_p50": round(statistics.median(single), 3), "policies": rows,
              "calibration": calibration}
    print(json.dumps(result))
    if args.json_out:
        write_json(args.json_out, result)


if __name__ == "__main__":
    main()
