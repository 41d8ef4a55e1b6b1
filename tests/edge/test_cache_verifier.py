"""The shipped verifier, its numpy tree evaluation, calibration sweeps and the index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import embedder  # noqa: F401  (module-scoped fixture)

from edge import Embedder, VerifierError
from edge.cache import Verifier, sweep
from edge.cache.index import IvfIndex
from edge.cache.pairs import Pair, is_heldout, load_pairs
from edge.cache.verifier import SCALAR_NAMES, features, fit_trees
from edge.errors import CacheError
from tests.conftest import QQP


def test_shipped_verifier_loads_with_a_calibrated_threshold() -> None:
    v = Verifier.shipped()
    assert 0.5 < v.threshold < 1.0
    assert v.trees is not None and v.weights.shape == (len(SCALAR_NAMES) + 2 * 384,)
    cal = v.meta["heldout_calibration"]
    assert cal["precision"] >= 0.95 and cal["threshold"] == pytest.approx(v.threshold, abs=1e-6)


def test_paraphrase_scores_above_threshold_and_antonym_below(embedder: Embedder) -> None:  # noqa: F811
    v = Verifier.shipped()
    a, b, c = embedder.embed_batch(["How do I reset my password?", "How can I reset my password?",
                                    "How do I turn off dark mode?"])
    assert v.probability("How can I reset my password?", b, "How do I reset my password?", a) > v.threshold
    assert v.probability("How do I turn off dark mode?", c, "How do I reset my password?", a) < 0.5


def test_verifier_runs_well_under_a_millisecond(embedder: Embedder) -> None:  # noqa: F811
    import time

    v = Verifier.shipped()
    a, b = embedder.embed_batch(["How do I reset my password?", "How can I reset my password?"])
    v.probability("x", a, "y", b)
    start = time.perf_counter()
    for _ in range(50):
        v.probability("How can I reset my password?", b, "How do I reset my password?", a)
    per_call = (time.perf_counter() - start) / 50
    assert per_call < 0.05  # a loose sanity bound; bench/cache.py measures it (~0.1 ms)


def test_numpy_tree_evaluation_matches_sklearn() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 5))
    y = (x[:, 0] + 0.5 * x[:, 1] * x[:, 2] > 0).astype(int)
    trees = fit_trees(x, y)
    ref = HistGradientBoostingClassifier(max_iter=150, learning_rate=0.08, max_leaf_nodes=15, random_state=0).fit(x, y)
    probe = rng.standard_normal((50, 5))
    mine = 1 / (1 + np.exp(-trees.raw(probe)))
    np.testing.assert_allclose(mine, ref.predict_proba(probe)[:, 1], atol=1e-9)


def test_verifier_round_trips_through_its_file(tmp_path: Path) -> None:
    v = Verifier.shipped()
    v.save(tmp_path / "v.json")
    again = Verifier.load(tmp_path / "v.json")
    x = features("a b c", np.eye(384, dtype=np.float32)[0], "a b d", np.eye(384, dtype=np.float32)[1])
    assert again.probabilities(x[None])[0] == pytest.approx(v.probabilities(x[None])[0], abs=1e-5)


def test_wrong_feature_version_is_refused(tmp_path: Path) -> None:
    doc = json.loads((Path(__file__).parents[2] / "edge/cache/data/verifier.json").read_text())
    doc["feature_version"] = 99
    (tmp_path / "v.json").write_text(json.dumps(doc))
    with pytest.raises(VerifierError, match="feature version 99"):
        Verifier.load(tmp_path / "v.json")


def test_sweep_picks_the_highest_recall_at_the_precision() -> None:
    scores = np.array([0.99, 0.98, 0.97, 0.96, 0.95, 0.90, 0.80, -1.0])
    labels = np.array([1, 1, 1, 1, 0, 1, 0, 1], dtype=bool)
    cal = sweep(scores, labels, precision=0.8, min_served=1)
    assert (cal.threshold, cal.served, cal.positives) == (0.90, 6, 6)
    assert cal.precision == pytest.approx(5 / 6) and cal.recall == pytest.approx(5 / 6)
    strict = sweep(scores, labels, precision=1.0, min_served=1)
    assert (strict.threshold, strict.served, strict.recall) == (0.96, 4, pytest.approx(4 / 6))
    assert sweep(scores, labels, precision=1.0, min_served=5).threshold is None


def test_pairs_file_errors_name_the_line(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"a": "x", "b": "y", "duplicate": true}\n{"a": "x"}\n')
    with pytest.raises(CacheError, match=r"p.jsonl:2"):
        load_pairs(f)


def test_split_is_deterministic_and_keeps_a_question_on_one_side() -> None:
    p1, p2 = Pair("Same question?", "b1", True), Pair("same question? ", "b2", False)
    assert is_heldout(p1) == is_heldout(p2)
    if not QQP.is_file():
        pytest.skip(f"{QQP} is absent: the QQP split share cannot be checked")
    from edge.cache import split_pairs

    train, held = split_pairs(load_pairs(QQP))
    assert len(held) / (len(train) + len(held)) == pytest.approx(0.2, abs=0.01)


def test_index_buckets_and_codes() -> None:
    index = IvfIndex.shipped()
    assert index.centroids.shape == (256, 384) and index.mean.shape == (384,)
    rng = np.random.default_rng(1)
    v = rng.standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    probes = index.probes(v, 8)
    assert len(probes) == 8 and probes[0] == int(index.buckets(v)[0])
    assert index.codes(v).shape == (1, 48)


def test_label_links_follow_duplicates_transitively_and_identical_text() -> None:
    from edge.cache import LabelLinks

    links = LabelLinks([
        Pair("How do I learn Python?", "What is the best way to learn Python?", True),
        Pair("What is the best way to learn Python?", "How can I start learning Python?", True),
        Pair("How do I learn Python?", "How do I learn Java?", False),
    ])
    assert links.same("How do I learn Python?", "How can I start learning Python?") is True
    assert links.same("How do I learn Python?", "How do I learn Java?") is False
    assert links.same("  how do I learn java?", "How do I learn Java?") is True


def test_retrieval_pairs_label_each_neighbour_by_the_pairs() -> None:
    from edge.cache.training import retrieval_pairs

    # Orthogonal stand-in vectors: q1 is near a1 (a labeled duplicate) and a2 (not linked).
    v = {
        "a1": np.array([1.0, 0.0, 0.0]), "a2": np.array([0.8, 0.6, 0.0]), "a3": np.array([0.0, 0.0, 1.0]),
        "q1": np.array([0.96, 0.28, 0.0]), "q3": np.array([0.0, 0.6, 0.8]),
    }
    pairs = [Pair("a1", "q1", True), Pair("a2", "x", False), Pair("a3", "q3", False)]
    v["x"] = np.array([0.0, 1.0, 0.0])
    got = retrieval_pairs(pairs, v.__getitem__, floor=0.75, k=2)
    assert sorted((p.b, p.a, p.duplicate) for p in got) == [
        ("q1", "a1", True), ("q1", "a2", False), ("q3", "a3", False),
    ]  # x's nearest (a2, cosine 0.6) is under the floor
