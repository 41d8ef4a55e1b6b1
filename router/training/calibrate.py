"""RouteLLM-style calibration: the complexity threshold that sends a requested share to the cloud."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..telemetry.events import DecisionEvent


@dataclass(frozen=True, slots=True)
class Calibration:
    threshold: float  # route to the cloud when complexity >= threshold
    target_share: float
    achieved_share: float  # on the calibration set; differs from the target only through ties
    n: int


def threshold_for_share(scores: Sequence[float], share: float) -> Calibration:
    """The threshold that sends round(share * n) of ``scores`` to the cloud.

    It lies halfway between the last score sent to the cloud and the first kept on the edge, so
    small differences between embedders do not flip prompts at the boundary.
    """
    if not 0.0 <= share <= 1.0 or math.isnan(share):
        raise ConfigError(
            f"target cloud share must be within [0, 1], got {share}", param="target_cloud_share"
        )
    values = sorted((float(s) for s in scores), reverse=True)
    if not values:
        raise ConfigError("cannot calibrate on an empty set of scores", param="prompts")
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise ConfigError("complexity scores must lie within [0, 1]", param="prompts")
    n = len(values)
    k = round(share * n)
    if k == 0:
        threshold = math.nextafter(values[0], math.inf) if values[0] < 1.0 else 1.0
    elif k == n:
        threshold = values[-1]
    else:
        threshold = (values[k - 1] + values[k]) / 2
    threshold = min(1.0, max(0.0, threshold))
    achieved = sum(v >= threshold for v in values) / n
    return Calibration(threshold=threshold, target_share=share, achieved_share=achieved, n=n)


def logged_scores(records: Iterable[DecisionEvent]) -> list[float]:
    """Complexity scores of the logged requests the threshold governs.

    Only requests the router routed (edge or cloud, not cache hits or errors), that carried no hint,
    were not private and had a complexity score: for the others the threshold changes nothing.
    """
    return [
        float(r.features["complexity"])
        for r in records
        if r.route in ("edge", "cloud")
        and r.features.get("complexity") is not None
        and r.features.get("hint", "auto") == "auto"
        and not r.features.get("private")
    ]
