"""The learned duplicate verifier: is the cached question the same question as the query?

Features of the pair: the two embeddings (element-wise product and absolute difference), their
cosine, lexical overlap and the guard signals. A logistic regression reads them all; small
gradient-boosted trees then combine its log-odds with the scalar features (the interactions a
linear model misses: "high cosine *and* same words"). Trained on the train split of the QQP
pairs (``edgeroute cache train-verifier``), shipped as one JSON file, evaluated with numpy at
lookup time (well under a millisecond).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VerifierError
from .guards import signal_vector

FEATURE_VERSION = 1
SHIPPED = "verifier.json"
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the is are was were be to of in on for and or i you it do does did how what why which who "
    "can could should would will my your me we this that with at by from as".split()
)
SCALAR_NAMES = (
    "cosine", "cosine_sq", "word_jaccard", "content_jaccard", "bigram_jaccard", "char3_jaccard",
    "length_ratio", "containment", "guard_negation", "guard_polarity", "guard_number", "entity_diff",
    "guard_order", "has_entities",
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _jaccard(x: set[Any], y: set[Any]) -> float:
    return len(x & y) / len(x | y) if (x or y) else 1.0


def scalar_features(query: str, candidate: str, cosine: float) -> list[float]:
    wa, wb = _words(query), _words(candidate)
    sa, sb = set(wa), set(wb)
    ca, cb = sa - _STOP, sb - _STOP
    ba, bb = set(zip(wa, wa[1:], strict=False)), set(zip(wb, wb[1:], strict=False))
    ta, tb = " ".join(wa), " ".join(wb)
    ga = {ta[i : i + 3] for i in range(max(len(ta) - 2, 0))}
    gb = {tb[i : i + 3] for i in range(max(len(tb) - 2, 0))}
    la, lb = max(len(wa), 1), max(len(wb), 1)
    small, big = (ca, cb) if len(ca) <= len(cb) else (cb, ca)
    return [
        cosine,
        cosine * cosine,
        _jaccard(sa, sb),
        _jaccard(ca, cb),
        _jaccard(ba, bb),
        _jaccard(ga, gb),
        min(la, lb) / max(la, lb),
        len(small & big) / len(small) if small else 1.0,
        *signal_vector(query, candidate),
    ]


def features(query: str, q_vec: np.ndarray, candidate: str, c_vec: np.ndarray) -> np.ndarray:
    """The verifier's input for one pair (both vectors L2-normalised)."""
    cosine = float(q_vec @ c_vec)
    scalars = np.asarray(scalar_features(query, candidate, cosine), dtype=np.float32)
    return np.concatenate([scalars, q_vec * c_vec, np.abs(q_vec - c_vec)]).astype(np.float32)


@dataclass
class Trees:
    """Gradient-boosted trees, padded into arrays so all trees are walked at once with numpy."""

    feature: np.ndarray  # (trees, nodes) int
    threshold: np.ndarray  # (trees, nodes) float; a leaf has +inf and points at itself
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray  # (trees, nodes) float, used at leaves
    depth: int
    baseline: float

    def raw(self, x: np.ndarray) -> np.ndarray:
        """Raw scores (log-odds) for rows of ``x``."""
        x = np.atleast_2d(x)
        n_trees = self.feature.shape[0]
        rows = np.arange(x.shape[0])[:, None]
        trees = np.arange(n_trees)[None, :]
        node = np.zeros((x.shape[0], n_trees), dtype=np.int64)
        for _ in range(self.depth):
            f = self.feature[trees, node]
            go_left = x[rows, f] <= self.threshold[trees, node]
            node = np.where(go_left, self.left[trees, node], self.right[trees, node])
        return self.value[trees, node].sum(axis=1) + self.baseline

    def to_json(self) -> dict[str, Any]:
        return {
            "feature": self.feature.tolist(),
            "threshold": [[None if not np.isfinite(t) else round(float(t), 7) for t in row] for row in self.threshold],
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "value": np.round(self.value, 7).tolist(),
            "depth": self.depth,
            "baseline": self.baseline,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Trees:
        thr = np.asarray([[np.inf if t is None else t for t in row] for row in doc["threshold"]], dtype=np.float64)
        return cls(
            np.asarray(doc["feature"], dtype=np.int64), thr, np.asarray(doc["left"], dtype=np.int64),
            np.asarray(doc["right"], dtype=np.int64), np.asarray(doc["value"], dtype=np.float64),
            int(doc["depth"]), float(doc["baseline"]),
        )


@dataclass
class Verifier:
    """Stage 1: a logistic regression over all features (input scaling folded into the weights).
    Stage 2: boosted trees over the scalar features plus stage 1's log-odds. ``threshold`` is on
    stage 2's probability."""

    weights: np.ndarray
    bias: float
    trees: Trees | None
    threshold: float
    meta: dict[str, Any] = field(default_factory=dict)

    def probability(self, query: str, q_vec: np.ndarray, candidate: str, c_vec: np.ndarray) -> float:
        return float(self.probabilities(features(query, q_vec, candidate, c_vec)[None, :])[0])

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Probabilities for a matrix of precomputed features."""
        x = np.atleast_2d(x)
        logit = x @ self.weights + self.bias
        if self.trees is not None:
            stacked = np.concatenate([x[:, : len(SCALAR_NAMES)], logit[:, None]], axis=1).astype(np.float64)
            logit = self.trees.raw(stacked)
        return 1.0 / (1.0 + np.exp(-logit))

    # -- files -----------------------------------------------------------------------------

    @classmethod
    def shipped(cls) -> Verifier:
        path = resources.files("edge.cache") / "data" / SHIPPED
        with resources.as_file(path) as real:
            return cls.load(Path(real))

    @classmethod
    def load(cls, path: Path) -> Verifier:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
            if doc.get("feature_version") != FEATURE_VERSION:
                raise VerifierError(
                    f"{path}: feature version {doc.get('feature_version')} is not {FEATURE_VERSION}; "
                    "retrain with `edgeroute cache train-verifier`"
                )
            weights = np.asarray(doc["weights"], dtype=np.float32)
            trees = Trees.from_json(doc["trees"]) if doc.get("trees") else None
            return cls(weights, float(doc["bias"]), trees, float(doc["threshold"]), dict(doc.get("meta", {})))
        except VerifierError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VerifierError(f"cannot read verifier weights from {path}: {exc}") from exc

    def save(self, path: Path) -> None:
        doc = {
            "feature_version": FEATURE_VERSION,
            "model": "logistic-regression + gradient-boosted trees",
            "scalars": list(SCALAR_NAMES),
            "threshold": round(self.threshold, 6),
            "bias": float(self.bias),
            "weights": [round(float(w), 6) for w in self.weights],
            "trees": self.trees.to_json() if self.trees is not None else None,
            "meta": self.meta,
        }
        Path(path).write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")


def fit(x: np.ndarray, y: np.ndarray, c: float = 1.0, seed: int = 0) -> tuple[np.ndarray, float]:
    """Standardise, fit a logistic regression, fold the scaler into (weights, bias)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=c, max_iter=3000, random_state=seed)
    model.fit(scaler.transform(x), y)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    w = model.coef_[0] / scale
    b = float(model.intercept_[0] - (model.coef_[0] * scaler.mean_ / scale).sum())
    return w.astype(np.float32), b


def fit_trees(x: np.ndarray, y: np.ndarray, seed: int = 0) -> Trees:
    """Boosted trees (sklearn's HistGradientBoosting) exported into padded arrays."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(
        max_iter=150, learning_rate=0.08, max_leaf_nodes=15, random_state=seed
    ).fit(x, y)
    predictors = [p[0] for p in model._predictors]  # one tree per iteration (binary task)
    n_nodes = max(len(p.nodes) for p in predictors)
    shape = (len(predictors), n_nodes)
    feature = np.zeros(shape, dtype=np.int64)
    threshold = np.full(shape, np.inf)
    left = np.tile(np.arange(n_nodes), (len(predictors), 1))
    right = left.copy()
    value = np.zeros(shape)
    depth = 0
    for t, p in enumerate(predictors):
        nodes = p.nodes
        for i, node in enumerate(nodes):
            value[t, i] = node["value"]
            if not node["is_leaf"]:
                feature[t, i] = node["feature_idx"]
                threshold[t, i] = node["num_threshold"]
                left[t, i] = node["left"]
                right[t, i] = node["right"]
        depth = max(depth, int(nodes["depth"].max()))
    baseline = float(np.ravel(model._baseline_prediction)[0])
    return Trees(feature, threshold, left, right, value, depth, baseline)
