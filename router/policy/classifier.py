"""The complexity classifier: logistic regression on the 384-d prompt embedding, evaluated with numpy.

The weights are a small JSON file (trained by ``edgeroute router train``); serving never imports
scikit-learn. The score is P(the prompt needs the cloud model).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

SHIPPED_WEIGHTS = Path(__file__).resolve().parent / "data" / "complexity.json"
FORMAT = 1


@dataclass(frozen=True)
class ComplexityClassifier:
    """``score(embedding) = sigmoid(coef . normalize(embedding) + intercept)``."""

    coef: np.ndarray  # float32, shape (dim,)
    intercept: float
    threshold: float = 0.5  # the decision threshold the training chose (informational)
    embedding_model: str = "all-minilm-l6-v2"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.coef.shape[0])

    def _check(self, shape: tuple[int, ...]) -> None:
        if shape[-1] != self.dim:
            raise ConfigError(
                f"the complexity classifier expects {self.dim}-d embeddings ({self.embedding_model}), "
                f"got shape {shape}",
                code="embedding_mismatch",
            )

    def score(self, embedding: np.ndarray) -> float:
        """P(cloud) of one embedding (normalised here, so un-normalised input is fine)."""
        e = np.asarray(embedding, dtype=np.float32).reshape(-1)
        self._check(e.shape)
        return float(self.score_batch(e[None, :])[0])

    def score_batch(self, embeddings: np.ndarray) -> np.ndarray:
        """P(cloud) of each row, float64."""
        x = np.asarray(embeddings, dtype=np.float32)
        if x.ndim != 2:
            raise ConfigError(
                f"expected a 2-d batch of embeddings, got shape {x.shape}", code="embedding_mismatch"
            )
        self._check(x.shape)
        norms = np.linalg.norm(x, axis=1)
        norms[norms == 0] = 1.0
        z = (x @ self.coef).astype(np.float64) / norms + self.intercept
        return 0.5 * (1.0 + np.tanh(0.5 * z))  # = sigmoid(z), without overflow

    def save(self, path: Path) -> None:
        weights = {
            "format": FORMAT,
            "kind": "logistic-regression",
            "embedding_model": self.embedding_model,
            "dim": self.dim,
            "threshold": self.threshold,
            "intercept": float(np.float32(self.intercept)),
            "coef": [float(v) for v in self.coef.astype(np.float32)],
            "meta": self.meta,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(weights, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path | None = None) -> ComplexityClassifier:
        """Read weights from ``path`` (default: the shipped file)."""
        path = Path(path) if path is not None else SHIPPED_WEIGHTS
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            hint = " (run `edgeroute router train`)" if path == SHIPPED_WEIGHTS else ""
            raise ConfigError(
                f"classifier weights not found: {path}{hint}", param="routing.complexity.classifier_path"
            ) from exc
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot read classifier weights {path}: {exc}", param="routing.complexity.classifier_path"
            ) from exc
        try:
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("format") != FORMAT or data.get("kind") != "logistic-regression":
                raise ValueError(f"unsupported format {data.get('format')!r}/{data.get('kind')!r}")
            coef = np.asarray(data["coef"], dtype=np.float32)
            if coef.ndim != 1 or coef.shape[0] != int(data["dim"]) or not np.all(np.isfinite(coef)):
                raise ValueError("coef must be a finite vector of length dim")
            return cls(
                coef=coef,
                intercept=float(data["intercept"]),
                threshold=float(data.get("threshold", 0.5)),
                embedding_model=str(data.get("embedding_model", "all-minilm-l6-v2")),
                meta=dict(data.get("meta") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"invalid classifier weights in {path}: {exc}", param="routing.complexity.classifier_path"
            ) from exc


@functools.lru_cache(maxsize=4)
def _load_cached(path: Path, mtime_ns: int) -> ComplexityClassifier:
    return ComplexityClassifier.load(path)


def load_classifier(path: Path | None = None) -> ComplexityClassifier:
    """The classifier at ``path`` (default: shipped), cached until the file changes."""
    path = Path(path).resolve() if path is not None else SHIPPED_WEIGHTS
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return ComplexityClassifier.load(path)  # raises the clear error
    return _load_cached(path, mtime)
