"""The shipped cross-encoder verifier, its calibration to an error budget, the judged set and its split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import embedder  # noqa: F401  (module-scoped fixture)

from edge import CacheSettings, Embedder, VerifierError
from edge.cache import Verifier, load_judged, split_judged
from edge.cache.calibration import sweep
from edge.cache.index import IvfIndex
from edge.cache.judged import part_of
from edge.cache.judged import Pair, is_heldout, load_pairs
from edge.cache.rewrites import CATEGORIES, generate
from edge.cache.calibration import wrong_rate_upper
from edge.cache.verifier import META_FILE, Platt, Replay, fit_platt, operating_point
from edge.errors import CacheError
from tests.conftest import QQP

DATA = Path(__file__).parents[2] / "edge" / "cache" / "data"


@pytest.fixture(scope="module")
def verifier() -> Verifier:
    return Verifier.shipped()


def _cos(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embedder.embed_batch([a, b])
    return float(va @ vb)


def test_batched_scores_equal_per_pair_scores(verifier: Verifier) -> None:
    query = "How do I reset my password on Windows 10?"
    cands = ["How can I reset my password on Windows 10?", "How do I reset my password on Windows 7?",
             "What is the best laptop under 500 dollars?"]
    cos = [0.97, 0.93, 0.2]
    batched = verifier.probabilities(query, cands, cos)
    single = np.array([float(verifier.probabilities(query, [c], [x])[0]) for c, x in zip(cands, cos, strict=True)])
    assert verifier.model.runs >= 4 and batched.shape == (3,)
    # Same model, same pairs: only INT8 activation scaling differs with the batch (see finetune.py).
    np.testing.assert_allclose(batched, single, atol=0.02)
    assert verifier.probabilities(query, [], []).shape == (0,)


def test_paraphrase_is_accepted_and_changed_specifics_are_refused(
    verifier: Verifier, embedder: Embedder  # noqa: F811
) -> None:
    from edge.cache.verifier import calibrated_threshold

    threshold = calibrated_threshold(verifier, CacheSettings())  # the shipped rule
    assert threshold < 1.0
    q = "How do I reset my password?"
    para = "how can I reset my password"
    assert verifier.probabilities(para, [q], [_cos(embedder, para, q)])[0] >= threshold
    for changed in ("How do I reset my password on Android?", "How do I reset my PIN?"):
        assert verifier.probabilities(changed, [q], [_cos(embedder, changed, q)])[0] < threshold, changed


def test_shipped_calibration_meets_the_default_budget(verifier: Verifier) -> None:
    point = verifier.operating_point(0.05, 0.8413, "wilson")
    assert point.threshold is not None and point.precision >= 0.95
    judged = verifier.meta["judged"]
    # The calibration replay is the judged calibration part plus the calibration-extra part.
    assert (judged["calibration"], judged["calibration_extra"]) == (529, 1483)
    assert point.pairs == 529 + 1483
    assert verifier.meta["operating_point"]["threshold"] == pytest.approx(point.threshold)
    # a stricter budget never serves more
    strict = verifier.operating_point(0.02, 0.8413, "wilson")
    assert strict.threshold is None or strict.served <= point.served


def test_shipped_model_is_small() -> None:
    size = (DATA / "verifier.onnx").stat().st_size
    assert 5_000_000 < size < 40_000_000


def test_wrong_format_is_refused(tmp_path: Path) -> None:
    doc = json.loads((DATA / META_FILE).read_text())
    doc["format"] = 1
    (tmp_path / META_FILE).write_text(json.dumps(doc))
    with pytest.raises(VerifierError, match="format 1 is not 2"):
        Verifier.load(tmp_path)
    with pytest.raises(VerifierError, match="cannot read the verifier"):
        Verifier.load(tmp_path / "absent")


def test_operating_point_picks_the_lowest_threshold_within_the_budget() -> None:
    # 30 pairs scored 0.99 .. 0.70 (step 0.01), two refused before the verifier (-1).
    scores = np.concatenate([np.round(np.arange(0.99, 0.695, -0.01), 2), [-1.0, -1.0]])
    servable = np.ones(len(scores), dtype=bool)
    servable[[3, 21, 24, 26, 27, 29, 30]] = False  # wrong at 0.96, 0.78, 0.75, 0.73, 0.72, 0.70; one refused
    replay = Replay(scores, servable)
    # By the point estimate (Wilson at 50%: z = 0): served >= 20 is required; at 0.79 (21 served) one is wrong,
    # 0.952 >= 0.95; at 0.78 two of 22.
    point = operating_point(replay, max_wrong_rate=0.05, confidence=0.5, bound="wilson")
    assert (point.threshold, point.served, point.positives, point.pairs) == (0.79, 21, 25, 32)
    assert point.precision == pytest.approx(20 / 21) and point.recall == pytest.approx(20 / 25)
    assert point.hit_rate == pytest.approx(21 / 32)
    loose = operating_point(replay, max_wrong_rate=0.20, confidence=0.5, bound="wilson")
    assert (loose.threshold, loose.served) == (0.70, 30)  # 6 wrong of 30: exactly 0.20
    # Wilson at 84.13% (z = 1): the wrong rate's upper bound must stay within the budget. 3 wrong
    # of 26 at 0.74 bounds at 0.193 <= 0.20; 4 of 27 at 0.73 at 0.229.
    confident = operating_point(replay, max_wrong_rate=0.20, confidence=0.8413, bound="wilson")
    assert (confident.threshold, confident.served) == (0.74, 26)
    assert confident.precision == pytest.approx(23 / 26)
    assert confident.wrong_bound == pytest.approx(0.19273, abs=1e-5)
    assert (confident.confidence, confident.bound) == (0.8413, "wilson")
    # one wrong among 21 served: 0.952 by the estimate, but not with confidence
    assert operating_point(replay, max_wrong_rate=0.05, confidence=0.8413, bound="wilson").threshold is None
    # Clopper-Pearson at 84.13% is stricter: 3 of 26 bounds at 0.2150, 2 of 24 (at 0.76) at 0.1828.
    exact = operating_point(replay, max_wrong_rate=0.20, confidence=0.8413, bound="clopper-pearson")
    assert (exact.threshold, exact.served, exact.bound) == (0.76, 24, "clopper-pearson")
    assert exact.wrong_bound == pytest.approx(0.18283, abs=1e-5)
    assert operating_point(replay, max_wrong_rate=0.01, confidence=0.5, bound="wilson").threshold is None


def test_wrong_rate_upper_bounds() -> None:
    wrong, served = np.array([0, 1, 3]), np.array([20, 21, 26])
    # Wilson at 50% is the point estimate; at z = 1 (84.13%) 1 of 21 bounds at 0.1180.
    np.testing.assert_allclose(wrong_rate_upper(wrong, served, 0.5), [0.0, 1 / 21, 3 / 26], atol=1e-12)
    np.testing.assert_allclose(wrong_rate_upper(wrong, served, 0.841344746), [0.04762, 0.11802, 0.19274], atol=1e-5)
    # Clopper-Pearson: none wrong of 20 at 90% is 1 - 0.1 ** (1 / 20).
    cp = wrong_rate_upper(wrong, served, 0.9, "clopper-pearson")
    np.testing.assert_allclose(cp, [1 - 0.1 ** (1 / 20), 0.17294, 0.23917], atol=1e-5)
    assert wrong_rate_upper(np.array([4]), np.array([4]), 0.9, "clopper-pearson")[0] == 1.0
    # More confidence, a higher bound; Clopper-Pearson never below Wilson here.
    assert (wrong_rate_upper(wrong, served, 0.95) > wrong_rate_upper(wrong, served, 0.84)).all()
    assert (cp >= wrong_rate_upper(wrong, served, 0.9)).all()
    with pytest.raises(ValueError, match="confidence"):
        wrong_rate_upper(wrong, served, 1.0)
    with pytest.raises(ValueError, match="unknown bound"):
        wrong_rate_upper(wrong, served, 0.9, "bayes")  # type: ignore[arg-type]


def test_platt_scaling_is_monotone_and_fits_the_labels() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, 400)
    labels = rng.random(400) < 1 / (1 + np.exp(-(1.5 * logits - 0.5)))
    platt = fit_platt(logits, labels)
    assert platt.a == pytest.approx(1.5, abs=0.35) and platt.b == pytest.approx(-0.5, abs=0.35)
    p = platt(np.array([-3.0, 0.0, 3.0]))
    assert p[0] < p[1] < p[2]
    assert Platt()(np.array([0.0]))[0] == 0.5
    with_cos = fit_platt(logits, labels, cosines=rng.random(400))
    assert with_cos.c != 0.0 and with_cos(np.array([1.0]), np.array([0.9])).shape == (1,)
    with pytest.raises(VerifierError, match="cosines"):
        with_cos(np.array([1.0]))
    with pytest.raises(VerifierError, match="both"):
        fit_platt(logits, np.ones(400, dtype=bool))


def test_sweep_picks_the_highest_recall_at_the_precision() -> None:
    scores = np.array([0.99, 0.98, 0.97, 0.96, 0.95, 0.90, 0.80, -1.0])
    labels = np.array([1, 1, 1, 1, 0, 1, 0, 1], dtype=bool)
    cal = sweep(scores, labels, precision=0.8, min_served=1)
    assert (cal.threshold, cal.served, cal.positives) == (0.90, 6, 6)
    assert cal.precision == pytest.approx(5 / 6) and cal.recall == pytest.approx(5 / 6)
    strict = sweep(scores, labels, precision=1.0, min_served=1)
    assert (strict.threshold, strict.served, strict.recall) == (0.96, 4, pytest.approx(4 / 6))
    assert sweep(scores, labels, precision=1.0, min_served=5).threshold is None


def test_shipped_judged_set_and_its_split() -> None:
    items = load_judged()
    parts = split_judged(items)
    assert len(items) == 2000 and sum(j.servable for j in items) == 1204
    assert {p: (len(v), sum(j.servable for j in v)) for p, v in parts.items()} == {
        "train": (674, 398), "calibration": (529, 326), "test": (797, 480),
    }
    # by query text: the same query (any case, outer spaces) always lands in the same part
    assert part_of("How do I learn Python?") == part_of("  how do i learn python? ")
    for part, group in parts.items():
        assert all(part_of(j.query) == part for j in group)


def test_judged_file_errors_name_the_line(tmp_path: Path) -> None:
    f = tmp_path / "j.jsonl"
    f.write_text('{"id": "1", "query": "a", "stored": "b", "servable": true}\n{"id": "2", "query": "a"}\n')
    with pytest.raises(CacheError, match=r"j.jsonl:2"):
        load_judged(f)
    f.write_text('{"id": "1", "query": "a", "stored": "b", "servable": "yes"}\n')
    with pytest.raises(CacheError, match="servable must be true or false"):
        load_judged(f)


def test_generated_pairs_are_deterministic_and_cover_every_category() -> None:
    questions = [
        "How do I move from India to Canada in 2017?", "Can I learn Python in 30 days?",
        "What is the best book for GATE?", "Is it safe to travel to Paris alone?",
        "How can I convert Celsius to Fahrenheit?", "Why should I learn Java at 25?",
    ] * 3
    first = generate(questions, n_negatives=10, n_positives=3, seed=7)
    assert first == generate(questions, n_negatives=10, n_positives=3, seed=7)
    cats = {r.category for r in first}
    assert cats == {*CATEGORIES, "reword"}
    assert all(not r.servable for r in first if r.category != "reword")
    assert all(r.query != r.stored for r in first)


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
