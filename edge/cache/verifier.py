"""The verifier: may the stored answer of question E be served to a user asking Q?

A MiniLM cross-encoder (``crossencoder.py``) scores the pair; Platt scaling fitted on the judged
calibration replay turns the score into a probability that serving is right. The threshold is not
a shipped constant: it follows from the error budget (``cache.max_wrong_rate``) and the
calibration replay stored with the model (the probability each calibration query's nearest
stored question got, and whether a reader judged it servable), see :func:`operating_point`.

Files (``edge/cache/data``): ``verifier.onnx`` (INT8), ``verifier-tokenizer.json`` and
``verifier.json`` (Platt parameters, calibration replay, training record).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VerifierError
from .calibration import Bound, Calibration, sweep
from .crossencoder import CrossEncoder

FORMAT = 2  # 1 was the logistic-regression + trees verifier over embeddings
MODEL_FILE = "verifier.onnx"
TOKENIZER_FILE = "verifier-tokenizer.json"
META_FILE = "verifier.json"
FILES = (MODEL_FILE, TOKENIZER_FILE, META_FILE)


@dataclass(frozen=True)
class Platt:
    """p = sigmoid(a * logit + c * cosine + b): Platt scaling, with the pair's embedding cosine as a
    second input (c = 0: plain Platt). The cosine carries what the cross-encoder does not see."""

    a: float = 1.0
    b: float = 0.0
    c: float = 0.0

    def __call__(self, logits: np.ndarray, cosines: np.ndarray | None = None) -> np.ndarray:
        z = self.a * np.asarray(logits, dtype=np.float64) + self.b
        if self.c:
            if cosines is None:
                raise VerifierError("this calibration needs the pairs' cosines")
            z = z + self.c * np.asarray(cosines, dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-z))


@dataclass
class Replay:
    """A calibration replay: each query's nearest stored question above the floor, as scored.

    ``scores`` is the calibrated probability, -1 where the floor or a guard refused the pair
    before the verifier ran; ``servable`` is the reader's judgement of the pair.
    """

    scores: np.ndarray
    servable: np.ndarray

    def as_json(self) -> dict[str, Any]:
        return {"scores": [round(float(s), 6) for s in self.scores], "servable": [bool(x) for x in self.servable]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Replay:
        return cls(np.asarray(doc["scores"], dtype=np.float64), np.asarray(doc["servable"], dtype=bool))


def operating_point(
    replay: Replay, max_wrong_rate: float, confidence: float | None = None, bound: Bound | None = None
) -> Calibration:
    """The lowest threshold whose served hits on ``replay`` are wrong at most ``max_wrong_rate`` of
    the time with ``confidence`` (one-sided upper bound ``bound`` on the wrong rate; defaults: the
    settings' ``budget_confidence`` and ``budget_bound``)."""
    from ..config import CacheSettings

    defaults = CacheSettings()
    return sweep(
        replay.scores, replay.servable, 1.0 - max_wrong_rate,
        confidence=defaults.budget_confidence if confidence is None else confidence,
        bound=defaults.budget_bound if bound is None else bound,
    )


@dataclass
class Verifier:
    model: CrossEncoder
    platt: Platt
    replay: Replay | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def probabilities(
        self, query: str, candidates: Sequence[str], cosines: Sequence[float] | None = None
    ) -> np.ndarray:
        """Calibrated probabilities of ``query`` against each candidate (embedding cosines given
        alongside): one batched model run."""
        cos = None if cosines is None else np.asarray(cosines, dtype=np.float64)
        return self.platt(self.model.logits(query, candidates), cos)

    def probability(self, query: str, candidate: str, cosine: float | None = None) -> float:
        return float(self.probabilities(query, [candidate], None if cosine is None else [cosine])[0])

    def operating_point(
        self, max_wrong_rate: float, confidence: float | None = None, bound: Bound | None = None
    ) -> Calibration:
        if self.replay is None:
            raise VerifierError("this verifier has no calibration replay; run `edgeroute cache calibrate --write`")
        return operating_point(self.replay, max_wrong_rate, confidence, bound)

    # -- files -----------------------------------------------------------------------------

    @classmethod
    def shipped(cls, threads: int = 1) -> Verifier:
        base = resources.files("edge.cache") / "data"
        with resources.as_file(base) as real:
            return cls.load(Path(real), threads=threads)

    @classmethod
    def load(cls, directory: Path, threads: int = 1) -> Verifier:
        directory = Path(directory)
        try:
            doc = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
            if doc.get("format") != FORMAT:
                raise VerifierError(
                    f"{directory / META_FILE}: format {doc.get('format')} is not {FORMAT}; "
                    "retrain with `edgeroute cache train-verifier`"
                )
            platt = Platt(float(doc["platt"]["a"]), float(doc["platt"]["b"]), float(doc["platt"].get("c", 0.0)))
            replay = Replay.from_json(doc["replay"]) if doc.get("replay") else None
            meta = dict(doc.get("meta", {}))
        except VerifierError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VerifierError(f"cannot read the verifier from {directory}: {exc}") from exc
        model = CrossEncoder(directory / MODEL_FILE, directory / TOKENIZER_FILE, threads=threads)
        return cls(model, platt, replay, meta)

    def save_meta(self, directory: Path) -> None:
        """Write ``verifier.json`` (the model and tokenizer files are written by the export)."""
        doc = {
            "format": FORMAT,
            "model": "MiniLM cross-encoder (ONNX INT8) + Platt scaling",
            "platt": {"a": round(self.platt.a, 6), "b": round(self.platt.b, 6), "c": round(self.platt.c, 6)},
            "replay": self.replay.as_json() if self.replay is not None else None,
            "meta": self.meta,
        }
        try:
            (Path(directory) / META_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise VerifierError(f"cannot write {directory / META_FILE}: {exc}") from exc


def fit_platt(logits: np.ndarray, labels: np.ndarray, cosines: np.ndarray | None = None) -> Platt:
    """Platt scaling: a logistic regression of the label on the raw score (and the cosine, if given)."""
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        raise VerifierError("Platt scaling needs both servable and unservable pairs")
    x = np.asarray(logits, dtype=np.float64)[:, None]
    if cosines is not None:
        x = np.concatenate([x, np.asarray(cosines, dtype=np.float64)[:, None]], axis=1)
    model = LogisticRegression(C=1e4, max_iter=1000).fit(x, y)
    c = float(model.coef_[0, 1]) if cosines is not None else 0.0
    return Platt(float(model.coef_[0, 0]), float(model.intercept_[0]), c)
