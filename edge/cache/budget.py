"""The error budget held online: a tenant's verifier threshold moved by the ratings of its hits.

Each rated semantic hit is (the verifier's probability when it was served, right or wrong). At a
threshold ``t`` the hits that would still be served are those with probability >= t; their wrong
rate has the same one-sided upper confidence bound ``edgeroute cache calibrate`` uses
(:func:`edge.cache.calibration.wrong_rate_upper`). The rule kept is the lowest threshold, never
below the calibrated one, at which either no rated hit is wrong (the calibration still speaks
for it) or the bound is within ``max_wrong_rate``: wrong ratings make it stricter, and it comes
down again only when enough right ratings bring the bound back within the budget.

The calibration replay counts too, as ``budget_prior_ratings`` ratings at its own wrong rate at
that threshold divided by ``calibration_margin`` (out of sample the wrong rate ran up to about
twice the replay's), so a tenant's first ratings are weighed with the replay's evidence rather
than alone; its ratings outweigh the replay once there are more of them than the prior's weight.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from models import SamplingParams

from ..config import CacheSettings
from .calibration import Bound, wrong_rate_upper
from .keys import greedy_equivalent

if TYPE_CHECKING:
    from .verifier import Verifier

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rated:
    """One rated semantic hit."""

    probability: float
    wrong: bool


@dataclass(frozen=True, slots=True)
class Prior:
    """The calibration replay's word on the wrong rate at a threshold, worth ``weight`` ratings."""

    scores: np.ndarray  # the replay's verifier probability per query (negative: refused before it)
    wrong: np.ndarray  # True where the replay's pair was judged not servable
    weight: float
    margin: float  # calibration_margin: the share of the budget the replay itself had to meet

    def at(self, threshold: float) -> tuple[float, float]:
        """(pseudo ratings, pseudo wrong ones) at ``threshold``: Laplace-smoothed, scaled by 1 / margin."""
        served = self.scores >= threshold
        n, wrong = int(served.sum()), int((served & self.wrong).sum())
        rate = min(1.0, (wrong + 1) / (n + 2) / self.margin)
        return self.weight, self.weight * rate


def prior_of(verifier: Verifier | None, s: CacheSettings) -> Prior | None:
    """The prior the settings ask for, from the verifier's calibration replay (None: ratings alone)."""
    if verifier is None or verifier.replay is None or s.budget_prior_ratings <= 0:
        return None
    replay = verifier.replay
    return Prior(replay.scores, ~replay.servable, float(s.budget_prior_ratings), s.calibration_margin)


@dataclass(frozen=True, slots=True)
class Rule:
    """The serving rule the ratings allow, and the estimate it rests on."""

    threshold: float
    rated: int  # rated hits at or above the threshold
    wrong: int
    bound: float | None  # over the ratings and the prior; None: no rated hit at or above it

    @property
    def estimate(self) -> float | None:
        return self.wrong / self.rated if self.rated else None


def estimate(
    ratings: Sequence[Rated], threshold: float, confidence: float, bound: Bound, prior: Prior | None = None
) -> Rule:
    """The wrong rate of the rated hits at ``threshold`` and its upper confidence bound (with the prior's counts)."""
    kept = [r for r in ratings if r.probability >= threshold]
    wrong = sum(r.wrong for r in kept)
    if not kept:
        return Rule(threshold, 0, 0, None)
    n, k = (0.0, 0.0) if prior is None else prior.at(threshold)
    upper = float(wrong_rate_upper(np.array([wrong + k]), np.array([len(kept) + n]), confidence, bound)[0])
    return Rule(threshold, len(kept), wrong, upper)


def choose(
    ratings: Sequence[Rated], base: float, max_wrong_rate: float, confidence: float, bound: Bound,
    prior: Prior | None = None,
) -> Rule:
    """The lowest threshold >= ``base`` the ratings allow (see the module's docstring).

    The candidates are ``base`` and, for each wrong-rated hit above it, the next float above its
    probability (the served set changes only there); the highest of them has no wrong hit left,
    so one always qualifies.
    """
    wrong_ps = sorted({r.probability for r in ratings if r.wrong and r.probability >= base})
    for t in [base, *(float(np.nextafter(p, np.inf)) for p in wrong_ps)]:
        rule = estimate(ratings, t, confidence, bound, prior)
        if rule.wrong == 0 or (rule.bound is not None and rule.bound <= max_wrong_rate):
            return rule
    raise AssertionError("unreachable: the last candidate keeps no wrong hit")


def calibrated_threshold(verifier: Verifier | None, s: CacheSettings) -> float:
    """The shipped rule: an explicit threshold, or the one meeting ``max_wrong_rate`` on the calibration replay."""
    if verifier is None or not s.verifier:
        return 1.0
    if s.verifier_threshold is not None:
        log.info("semantic cache: verifier threshold %.4f (set explicitly)", s.verifier_threshold)
        return s.verifier_threshold
    target = s.max_wrong_rate * s.calibration_margin
    point = verifier.operating_point(target, s.budget_confidence, s.budget_bound)
    if point.threshold is None:
        log.warning("semantic cache: no verifier threshold keeps wrong hits under %.3f on the calibration "
                    "replay; semantic hits are off", target)
        return 1.01  # above any probability (and still a finite number for JSON stats)
    log.info(
        "semantic cache: verifier threshold %.4f for max_wrong_rate %.3f (the calibration replay held to %.3f) at "
        "%.0f%% confidence (%s; calibration replay: %d queries, expected hit rate %.3f, precision %.3f, wrong-rate "
        "bound %.3f, recall of answerable %.3f)",
        point.threshold, s.max_wrong_rate, target, 100 * s.budget_confidence, s.budget_bound, point.pairs,
        point.hit_rate, point.precision, point.wrong_bound, point.recall,
    )
    return point.threshold


def skip_probability(params: SamplingParams, by_temperature: bool) -> float:
    """GPTCache's: 1 / (1 + e^(1/T)) for a sampled request (0.12 at T = 0.5, 0.27 at 1), every one
    from T = 2 on, none for a greedy (or greedy-equivalent: :func:`keys.greedy_equivalent`) or
    seeded one; 0 unless ``by_temperature``."""
    t = params.temperature
    if not by_temperature or params.deterministic or greedy_equivalent(params):
        return 0.0
    return 1.0 if t >= 2.0 else 1.0 / (1.0 + math.exp(1.0 / t))
