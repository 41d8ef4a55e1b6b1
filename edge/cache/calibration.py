"""Calibration: pick the verifier threshold with the highest recall at a required hit precision.

On a replay (each query's nearest stored question, judged servable or not), ``positives`` are the
answerable queries, so ``recall`` is the share of answerable queries served right and
``hit_rate`` the share of all queries served.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Bound = Literal["wilson", "clopper-pearson"]
BOUNDS: tuple[Bound, ...] = ("wilson", "clopper-pearson")

CURVE_THRESHOLDS = (0.99, 0.98, 0.97, 0.96, 0.95, 0.93, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)


@dataclass(frozen=True)
class Calibration:
    threshold: float | None  # None: no threshold reaches the precision
    precision: float
    recall: float
    served: int
    positives: int
    pairs: int
    target_precision: float
    curve: list[dict[str, float]] = field(default_factory=list)
    # The one-sided upper confidence bound on the wrong rate of the served hits at ``threshold``.
    wrong_bound: float | None = None
    confidence: float = 0.5  # 0.5 with "wilson": the point estimate itself
    bound: Bound = "wilson"

    @property
    def hit_rate(self) -> float:
        return self.served / self.pairs if self.pairs else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "hit_rate": self.hit_rate}


def wrong_rate_upper(wrong: np.ndarray, served: np.ndarray, confidence: float, bound: Bound = "wilson") -> np.ndarray:
    """One-sided upper confidence bound, at ``confidence``, on a wrong rate ``wrong / served``.

    "wilson": the Wilson score bound (z the normal quantile of ``confidence``; 0.5 gives the point
    estimate). "clopper-pearson": the exact binomial bound (the ``confidence`` quantile of
    Beta(wrong + 1, served - wrong); 1 when every one is wrong), never below the true coverage.
    """
    from scipy.stats import beta, norm

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    k = np.asarray(wrong, dtype=np.float64)
    n = np.asarray(served, dtype=np.float64)
    if bound == "wilson":
        # The Wilson score lower bound of the right rate (z = 0: the rate itself), from 1.
        z, p = float(norm.ppf(confidence)), (n - k) / n
        if z == 0.0:
            return 1.0 - p
        margin = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return 1.0 - (p + z * z / (2 * n) - margin) / (1 + z * z / n)
    if bound == "clopper-pearson":
        with np.errstate(invalid="ignore", divide="ignore"):
            upper = beta.ppf(confidence, k + 1, np.maximum(n - k, 1e-300))
        return np.where(k >= n, 1.0, upper)
    raise ValueError(f"unknown bound {bound!r}; one of {BOUNDS}")


def sweep(
    scores: np.ndarray, labels: np.ndarray, precision: float, min_served: int = 20, confidence: float = 0.5,
    bound: Bound = "wilson",
) -> Calibration:
    """Sweep thresholds over ``scores`` (NaN or negative: refused before scoring).

    A pair is served when its score >= threshold. Among thresholds whose served precision is
    >= ``precision`` (with at least ``min_served`` served, so one lucky pair cannot decide),
    take the lowest, i.e. the highest recall. With ``confidence`` above 0.5 the upper confidence
    bound (``bound``) of the served wrong rate must stay within ``1 - precision`` instead: on a few
    hundred pairs the lowest threshold that reaches it by the point estimate is mostly luck (it
    overstates precision on new queries).
    """
    s = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-1.0)
    y = np.asarray(labels, dtype=bool)
    positives = int(y.sum())
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    tp = np.cumsum(y_sorted)
    served = np.arange(1, len(s) + 1)
    # Only the last index of a run of equal scores is a real threshold.
    last = np.r_[s_sorted[1:] != s_sorted[:-1], True] & (s_sorted >= 0)
    prec = tp / served
    upper = wrong_rate_upper(served - tp, served, confidence, bound)
    # A rounding margin: a bound equal to the budget meets it.
    ok = last & (upper <= 1.0 - precision + 1e-12) & (served >= min_served)
    curve = []
    for q in CURVE_THRESHOLDS:
        idx = np.where(last & (s_sorted >= q))[0]
        if len(idx):
            i = idx[-1]
            curve.append({"threshold": q, "precision": float(prec[i]), "recall": float(tp[i] / max(positives, 1)),
                          "served": int(served[i])})
    if not ok.any():
        return Calibration(None, 0.0, 0.0, 0, positives, len(s), precision, curve, None, confidence, bound)
    i = int(np.where(ok)[0][-1])
    return Calibration(
        threshold=float(s_sorted[i]),
        precision=float(prec[i]),
        recall=float(tp[i] / max(positives, 1)),
        served=int(served[i]),
        positives=positives,
        pairs=len(s),
        target_precision=precision,
        curve=curve,
        wrong_bound=float(upper[i]),
        confidence=confidence,
        bound=bound,
    )
