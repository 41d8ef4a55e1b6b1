"""The routing report: accuracy against labels, cloud share, and decision latency beyond the embedding."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..policy.classifier import ComplexityClassifier
from ..policy.features import Decision, Features, Policy
from ..policy.privacy import PrivacyDetector
from ..policy.rules import decide
from .dataset import LabeledPrompt


@dataclass(frozen=True, slots=True)
class NodeState:
    """The live signals assumed while evaluating: an idle edge and one idle, healthy cloud member."""

    edge_max_queue: int = 32
    n_ctx: int = 2048
    default_max_tokens: int = 256
    cloud_healthy: int = 1


@dataclass(frozen=True)
class EvalReport:
    policy: str
    threshold: float
    n: int
    labeled: int
    accuracy: float | None
    cloud_precision: float | None
    cloud_recall: float | None
    confusion: dict[str, int]  # label->decision counts: edge->edge, edge->cloud, cloud->edge, cloud->cloud
    cloud_share: float
    label_cloud_share: float | None
    decision_us_p50: float  # privacy rules + classifier score + Features + decide, per request, microseconds
    decision_us_p95: float
    decision_samples: int
    reasons: dict[str, int]
    misrouted: list[dict[str, Any]] = field(default_factory=list)
    by_category: dict[str, float] = field(default_factory=dict)  # accuracy per category


def _features(tokens: int, complexity: float, state: NodeState) -> Features:
    return Features(
        prompt_tokens=tokens,
        max_tokens=None,
        complexity=complexity,
        edge_running=0,
        edge_waiting=0,
        edge_max_queue=state.edge_max_queue,
        fits_edge_context=tokens + state.default_max_tokens <= state.n_ctx,
        cloud_healthy=state.cloud_healthy,
        cloud_outstanding=0,
        cloud_ttft_ms=None,
        hint="auto",
        private=False,
    )


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def evaluate(
    prompts: Sequence[LabeledPrompt],
    embeddings: np.ndarray,
    tokens: Sequence[int],
    clf: ComplexityClassifier,
    policy: Policy,
    *,
    threshold: float,
    state: NodeState | None = None,
    repeats: int = 20,
    privacy: PrivacyDetector | None = None,
) -> EvalReport:
    """Decide every prompt as the node would with idle sides, and compare with the labels.

    The decision latency is what the node does beyond the embedding: the privacy rules on the
    prompt text (when ``privacy`` is given), the classifier score, the features and ``decide``,
    timed per request over ``repeats`` passes after a first pass that warms up.
    """
    state = state or NodeState()

    def one(e: np.ndarray, t: int, text: str) -> Decision:
        if privacy is not None:
            privacy.detect(text)
        return decide(policy, _features(t, clf.score(e), state))

    rows = list(zip(embeddings, tokens, [p.text for p in prompts], strict=True))
    decisions = [one(*row) for row in rows]
    samples: list[float] = []
    for _ in range(repeats):
        for row in rows:
            t0 = time.perf_counter_ns()
            one(*row)
            samples.append((time.perf_counter_ns() - t0) / 1000)
    confusion = {"edge->edge": 0, "edge->cloud": 0, "cloud->edge": 0, "cloud->cloud": 0}
    misrouted: list[dict[str, Any]] = []
    per_cat: dict[str, list[bool]] = {}
    for p, d in zip(prompts, decisions, strict=True):
        if p.label is None:
            continue
        confusion[f"{p.label}->{d.target}"] += 1
        per_cat.setdefault(p.category or "-", []).append(p.label == d.target)
        if p.label != d.target:
            misrouted.append(
                {
                    "text": p.text,
                    "label": p.label,
                    "target": d.target,
                    "reason": d.reason,
                    "score": round(d.score, 4),
                }
            )
    labeled = sum(confusion.values())
    correct = confusion["edge->edge"] + confusion["cloud->cloud"]
    sent_cloud = confusion["edge->cloud"] + confusion["cloud->cloud"]
    label_cloud = confusion["cloud->edge"] + confusion["cloud->cloud"]
    return EvalReport(
        policy=policy.name,
        threshold=threshold,
        n=len(prompts),
        labeled=labeled,
        accuracy=_ratio(correct, labeled),
        cloud_precision=_ratio(confusion["cloud->cloud"], sent_cloud),
        cloud_recall=_ratio(confusion["cloud->cloud"], label_cloud),
        confusion=confusion,
        cloud_share=_ratio(sum(d.target == "cloud" for d in decisions), len(decisions)) or 0.0,
        label_cloud_share=_ratio(label_cloud, labeled),
        decision_us_p50=round(statistics.median(samples), 2) if samples else 0.0,
        decision_us_p95=round(float(np.percentile(samples, 95)), 2) if samples else 0.0,
        decision_samples=len(samples),
        reasons=dict(sorted(Counter(d.reason for d in decisions).items())),
        misrouted=misrouted,
        by_category={c: round(sum(v) / len(v), 4) for c, v in sorted(per_cat.items())},
    )
