"""The verifier: may the stored answer of question E be served to a user asking Q?

A MiniLM cross-encoder (:class:`CrossEncoder`) scores the pair; Platt scaling fitted on the judged
calibration replay turns the score into a probability that serving is right. The threshold follows
from the error budget and the calibration replay stored with the model (:func:`calibrated_threshold`).

Files (``edge/cache/data``): ``verifier.onnx`` (INT8), ``verifier-tokenizer.json`` and
``verifier.json`` (Platt parameters, calibration replay, training record).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..config import CacheSettings
from ..embedder import onnx_session
from ..errors import VerifierError
from .calibration import Bound, Calibration, sweep

log = logging.getLogger(__name__)

FORMAT = 2  # 1 was the logistic-regression + trees verifier over embeddings
MODEL_FILE = "verifier.onnx"
TOKENIZER_FILE = "verifier-tokenizer.json"
META_FILE = "verifier.json"
MAX_TOKENS = 64  # query + stored question; the questions a cache compares are short


class CrossEncoder:
    """The verifier's model in ONNX (INT8): raw scores (logits) of (query, stored) pairs, read as one
    input (``[CLS] q [SEP] s [SEP]``) so attention compares their words directly ("to Paris" vs "from
    Paris"); larger means "the stored answer serves the query"."""

    def __init__(self, model: Path, tokenizer: Path, *, threads: int = 1) -> None:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(tokenizer))
            # As for the embedder: no per-shape plans kept, the arena shrunk after each run, so
            # batches of every size leave no memory behind.
            self._session, self._run_options, self._inputs = onnx_session(model, threads)
        except Exception as exc:  # onnxruntime and tokenizers raise their own base types
            raise VerifierError(f"cannot load the verifier model {model}: {exc}") from exc
        tok.enable_truncation(MAX_TOKENS, strategy="longest_first")
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest pair of the batch
        self._tokenizer = tok
        self._lock = threading.Lock()  # the tokenizer's padding state is shared; runs are short
        self.runs = 0

    def pair_logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Scores of arbitrary (query, stored) pairs, in one model run."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            enc = self._tokenizer.encode_batch([(q or " ", s or " ") for q, s in pairs])
            self.runs += 1
        feed: dict[str, Any] = {
            "input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
        }
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.asarray([e.type_ids for e in enc], dtype=np.int64)
        try:
            out = self._session.run(None, feed, self._run_options)[0]
        except Exception as exc:  # onnxruntime's errors have no common public base
            raise VerifierError(f"the verifier model failed: {exc}") from exc
        return np.asarray(out, dtype=np.float32).reshape(len(pairs))

    def many_logits(self, pairs: Sequence[tuple[str, str]], batch: int = 64) -> np.ndarray:
        """Scores of many pairs (training, calibration), in batches of ``batch``."""
        parts = [self.pair_logits(pairs[i : i + batch]) for i in range(0, len(pairs), batch)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class Platt:
    """p = sigmoid(a * logit + c * cosine + b): Platt scaling, with the pair's embedding cosine as a
    second input (c = 0: plain Platt). The cosine carries what the cross-encoder does not see."""

    a: float = 1.0
    b: float = 0.0
    c: float = 0.0

    def __call__(self, logits: np.ndarray, cosines: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
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


def operating_point(replay: Replay, max_wrong_rate: float, confidence: float, bound: Bound) -> Calibration:
    """The lowest threshold whose served hits on ``replay`` are wrong at most ``max_wrong_rate`` of
    the time with ``confidence`` (one-sided upper bound ``bound`` on the wrong rate)."""
    return sweep(replay.scores, replay.servable, 1.0 - max_wrong_rate, confidence=confidence, bound=bound)


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
        return self.platt(self.model.pair_logits([(query, c) for c in candidates]), cosines)

    def operating_point(self, max_wrong_rate: float, confidence: float, bound: Bound) -> Calibration:
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
            rd = doc.get("replay")
            replay = None if not rd else Replay(
                np.asarray(rd["scores"], dtype=np.float64), np.asarray(rd["servable"], dtype=bool)
            )
            meta = dict(doc.get("meta", {}))
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
            "replay": None if self.replay is None else {
                "scores": [round(float(s), 6) for s in self.replay.scores],
                "servable": [bool(x) for x in self.replay.servable],
            },
            "meta": self.meta,
        }
        try:
            (Path(directory) / META_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise VerifierError(f"cannot write {directory / META_FILE}: {exc}") from exc


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
