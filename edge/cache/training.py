"""Training the shipped artifacts from labeled pairs: the verifier, its threshold, the IVF centroids.

``edgeroute cache train-verifier --pairs ../shared/data/qqp_pairs.jsonl`` runs :func:`train`;
``edgeroute cache calibrate`` runs :func:`score_pairs` and :func:`calibration.sweep`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from ..config import CacheSettings
from ..embedder import Embedder
from . import guards
from .calibration import Calibration, sweep
from .index import IvfIndex, train_index
from .pairs import LabelLinks, Pair, split_pairs
from .verifier import SCALAR_NAMES, Verifier, features, fit, fit_trees

Vectors = Callable[[str], np.ndarray]


def embed_all(embedder: Embedder, texts: Sequence[str], progress: bool = True, batch: int = 64) -> dict[str, np.ndarray]:
    """Embeddings of the unique ``texts``, in batches."""
    unique = list(dict.fromkeys(texts))
    out: dict[str, np.ndarray] = {}
    for i in tqdm(range(0, len(unique), batch), desc="embed", disable=not progress, unit="batch"):
        part = unique[i : i + batch]
        for t, v in zip(part, embedder.embed_batch(part), strict=True):
            out[t] = v
    return out


def pair_features(pairs: Sequence[Pair], vec: Vectors) -> np.ndarray:
    """Verifier features with ``b`` as the query and ``a`` as the cached candidate."""
    return np.stack([features(p.b, vec(p.b), p.a, vec(p.a)) for p in pairs])


def retrieval_pairs(pairs: Sequence[Pair], vec: Vectors, floor: float, k: int = 4, block: int = 1024) -> list[Pair]:
    """The pairs a cache lookup actually judges: each ``b`` against its ``k`` nearest stored ``a``.

    Store every ``a``, query every ``b`` (the replay, on these pairs only) and label each
    neighbour above ``floor`` by the pairs' own labels (linked through labeled duplicates, or
    the same text). QQP's pairs are all on one topic; these add the near neighbours a cache
    meets that no pair covers, most of them different questions.
    """
    links = LabelLinks(list(pairs))
    stored = list(dict.fromkeys(p.a for p in pairs))
    queries = list(dict.fromkeys(p.b for p in pairs))
    matrix = np.stack([vec(t) for t in stored])
    k = min(k, len(stored))
    out: list[Pair] = []
    for start in range(0, len(queries), block):
        part = queries[start : start + block]
        sims = np.stack([vec(t) for t in part]) @ matrix.T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for row, query in enumerate(part):
            for j in top[row]:
                if sims[row, j] >= floor:
                    out.append(Pair(a=stored[j], b=query, duplicate=links.same(query, stored[j])))
    return out


def score_pairs(pairs: Sequence[Pair], vec: Vectors, verifier: Verifier | None, settings: CacheSettings) -> np.ndarray:
    """The score each pair gets from the semantic layer; -1 where the floor or a guard refuses it.

    Without a verifier (cosine only), the score is the cosine itself.
    """
    scores = np.full(len(pairs), -1.0)
    if not pairs:
        return scores
    x = pair_features(pairs, vec)
    cos = x[:, 0]
    probs = verifier.probabilities(x) if verifier is not None else cos
    for i, p in enumerate(pairs):
        if cos[i] < settings.similarity_floor:
            continue
        if settings.guards and guards.check(p.b, p.a) is not None:
            continue
        scores[i] = probs[i]
    return scores


@dataclass
class Trained:
    verifier: Verifier
    index: IvfIndex
    calibration: Calibration
    n_train: int
    n_heldout: int


def train(
    pairs: Sequence[Pair],
    vec: Vectors,
    *,
    precision: float = 0.95,
    settings: CacheSettings | None = None,
    folds: int = 5,
    seed: int = 0,
    neighbours: int = 0,
) -> Trained:
    """Fit the verifier on the train split, calibrate its threshold on the held-out split.

    The training set is the train pairs plus their :func:`retrieval_pairs` (``neighbours`` per
    query; 0, the default, leaves them out: trained with 4 they did not raise strict replay
    precision here, see the README's Cache section).
    """
    settings = settings or CacheSettings()
    train_set, heldout = split_pairs(list(pairs))
    extra = retrieval_pairs(train_set, vec, settings.similarity_floor, neighbours) if neighbours else []
    x = pair_features([*train_set, *extra], vec)
    y = np.asarray([p.duplicate for p in [*train_set, *extra]])
    weights, bias = fit(x, y, seed=seed)
    # The trees learn from out-of-fold logits: in-sample ones would be overconfident.
    oof = np.zeros(len(y))
    fold_of = np.random.default_rng(seed).integers(0, folds, len(y))
    for k in range(folds):
        w_k, b_k = fit(x[fold_of != k], y[fold_of != k], seed=seed)
        oof[fold_of == k] = x[fold_of == k] @ w_k + b_k
    trees = fit_trees(np.concatenate([x[:, : len(SCALAR_NAMES)], oof[:, None]], axis=1), y, seed=seed)
    verifier = Verifier(weights, bias, trees, threshold=0.5)
    scores = score_pairs(heldout, vec, verifier, settings)
    cal = sweep(scores, np.asarray([p.duplicate for p in heldout]), precision)
    verifier.threshold = cal.threshold if cal.threshold is not None else 1.0
    verifier.meta = {
        "trained_on": "train split of qqp_pairs.jsonl (80%, split by sha256 of the first question)",
        "n_train": len(train_set),
        "n_retrieval_pairs": len(extra),
        "n_heldout": len(heldout),
        "similarity_floor": settings.similarity_floor,
        "heldout_calibration": {k: v for k, v in cal.as_dict().items() if k != "curve"},
    }
    train_texts = list(dict.fromkeys(t for p in train_set for t in (p.a, p.b)))
    index = train_index(np.stack([vec(t) for t in train_texts]), seed=seed)
    return Trained(verifier, index, cal, len(train_set), len(heldout))
