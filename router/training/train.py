"""Training the complexity classifier (scikit-learn; imported only by ``edgeroute router train``)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..policy.classifier import SHIPPED_WEIGHTS, ComplexityClassifier
from .dataset import SHIPPED_PROMPTS, is_held_out, load_prompts
from .embed import EmbedFn

C_GRID = (0.3, 1.0, 3.0, 10.0, 30.0)
CV_FOLDS = 5


@dataclass(frozen=True, slots=True)
class TrainReport:
    prompts: str
    out: str
    n_train: int
    n_test: int
    C: float
    cv_accuracy: float  # mean 5-fold accuracy of the chosen C on the train split
    train_accuracy: float
    test_accuracy: float  # on the held-out split, never seen by the fit or the C search
    embed_s: float
    fit_s: float


def fit(x: np.ndarray, y: np.ndarray) -> tuple[ComplexityClassifier, float, float]:
    """Logistic regression with C chosen by stratified k-fold accuracy; returns (model, C, cv accuracy)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    if len(set(y.tolist())) != 2:
        raise ConfigError("training needs both edge and cloud examples", param="prompts")
    folds = StratifiedKFold(n_splits=min(CV_FOLDS, int(np.bincount(y).min())), shuffle=True, random_state=0)
    best_c, best_acc = C_GRID[0], -1.0
    for c in C_GRID:
        acc = float(cross_val_score(LogisticRegression(C=c, max_iter=5000), x, y, cv=folds).mean())
        if acc > best_acc + 1e-9:  # ties keep the smaller C (stronger regularisation)
            best_c, best_acc = c, acc
    model = LogisticRegression(C=best_c, max_iter=5000).fit(x, y)
    clf = ComplexityClassifier(
        coef=model.coef_[0].astype(np.float32), intercept=float(model.intercept_[0]), threshold=0.5
    )
    return clf, best_c, best_acc


def train(embed: EmbedFn, prompts_path: Path | None = None, out: Path | None = None) -> TrainReport:
    """Embed the labeled set, fit on its train split, report held-out accuracy, write the weights."""
    prompts_path = Path(prompts_path) if prompts_path is not None else SHIPPED_PROMPTS
    out = Path(out) if out is not None else SHIPPED_WEIGHTS
    prompts = load_prompts(prompts_path)
    held_out = np.array([is_held_out(p.text) for p in prompts])
    y = np.array([p.label == "cloud" for p in prompts], dtype=np.int64)

    t0 = time.perf_counter()
    x = embed([p.text for p in prompts])
    embed_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    clf, c, cv_acc = fit(x[~held_out], y[~held_out])
    fit_s = time.perf_counter() - t0

    def accuracy(mask: np.ndarray) -> float:
        if not mask.any():
            return float("nan")
        return float(((clf.score_batch(x[mask]) >= clf.threshold) == y[mask]).mean())

    report = TrainReport(
        prompts=str(prompts_path),
        out=str(out),
        n_train=int((~held_out).sum()),
        n_test=int(held_out.sum()),
        C=c,
        cv_accuracy=round(cv_acc, 4),
        train_accuracy=round(accuracy(~held_out), 4),
        test_accuracy=round(accuracy(held_out), 4),
        embed_s=round(embed_s, 2),
        fit_s=round(fit_s, 2),
    )
    meta = {"prompts_sha256": hashlib.sha256(prompts_path.read_bytes()).hexdigest()} | {
        k: getattr(report, k) for k in ("n_train", "n_test", "C", "cv_accuracy", "test_accuracy")
    }
    ComplexityClassifier(clf.coef, clf.intercept, clf.threshold, clf.embedding_model, meta).save(out)
    return report
