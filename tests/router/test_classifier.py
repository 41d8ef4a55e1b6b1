"""The complexity classifier's numpy inference, its weights file, and the labeled prompt set."""

from __future__ import annotations

import collections
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from router.errors import ConfigError
from router.policy import ComplexityClassifier, load_classifier
from router.policy.classifier import SHIPPED_WEIGHTS
from router.training.dataset import SHIPPED_PROMPTS, is_held_out, load_prompts, select
from router.training.train import fit

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def toy() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(80, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    return x, y


def test_numpy_scores_match_scikit_learn(toy: tuple[np.ndarray, np.ndarray]) -> None:
    from sklearn.linear_model import LogisticRegression

    x, y = toy
    clf, c, cv = fit(x, y)
    reference = LogisticRegression(C=c, max_iter=5000).fit(x, y).predict_proba(x)[:, 1]
    np.testing.assert_allclose(clf.score_batch(x), reference, atol=1e-5)
    assert clf.score(x[3]) == pytest.approx(reference[3], abs=1e-5)
    assert 0.0 <= cv <= 1.0


def test_score_normalises_its_input(toy: tuple[np.ndarray, np.ndarray]) -> None:
    clf, _, _ = fit(*toy)
    e = toy[0][0]
    assert clf.score(3.0 * e) == pytest.approx(clf.score(e), abs=1e-6)
    assert clf.score(np.zeros(384, dtype=np.float32)) == pytest.approx(1 / (1 + np.exp(-clf.intercept)))


def test_extreme_logits_do_not_overflow() -> None:
    clf = ComplexityClassifier(coef=np.full(384, 1000.0, dtype=np.float32), intercept=0.0)
    e = np.ones(384, dtype=np.float32)
    assert clf.score(e) == 1.0
    assert clf.score(-e) == 0.0
    np.testing.assert_array_equal(clf.score_batch(np.stack([e, -e])), [1.0, 0.0])


def test_wrong_embedding_size_is_a_clear_error() -> None:
    clf = load_classifier()
    with pytest.raises(
        ConfigError, match=r"expects 384-d embeddings \(all-minilm-l6-v2\), got shape \(768,\)"
    ):
        clf.score(np.ones(768, dtype=np.float32))
    with pytest.raises(ConfigError, match="2-d batch"):
        clf.score_batch(np.ones(384, dtype=np.float32))


def test_save_and_load_round_trip(tmp_path: Path, toy: tuple[np.ndarray, np.ndarray]) -> None:
    clf, _, _ = fit(*toy)
    path = tmp_path / "w" / "complexity.json"
    clf.save(path)
    again = ComplexityClassifier.load(path)
    np.testing.assert_allclose(again.score_batch(toy[0]), clf.score_batch(toy[0]), atol=1e-6)
    assert load_classifier(path) is load_classifier(path)  # cached until the file changes


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read classifier weights"),
        ("[1, 2]", "not a JSON object"),
        ('{"format": 2, "kind": "logistic-regression"}', "unsupported format"),
        (
            '{"format": 1, "kind": "logistic-regression", "dim": 3, "coef": [1, 2], "intercept": 0}',
            "length dim",
        ),
        ('{"format": 1, "kind": "logistic-regression", "dim": 2, "coef": [1, 2]}', "intercept"),
    ],
)
def test_invalid_weights_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as err:
        ComplexityClassifier.load(path)
    assert err.value.param == "routing.complexity.classifier_path"


def test_missing_weights_are_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="classifier weights not found"):
        load_classifier(tmp_path / "nope.json")


def test_shipped_weights_were_trained_on_the_shipped_prompts() -> None:
    clf = load_classifier()
    assert (clf.dim, clf.embedding_model, clf.threshold) == (384, "all-minilm-l6-v2", 0.5)
    assert clf.meta["prompts_sha256"] == hashlib.sha256(SHIPPED_PROMPTS.read_bytes()).hexdigest()
    assert clf.meta["test_accuracy"] >= 0.90
    assert SHIPPED_WEIGHTS.stat().st_size < 16_000


def test_serving_imports_neither_scikit_learn_nor_sentence_transformers() -> None:
    code = (
        "import sys, numpy as np\n"
        "from router.policy import build_policy, load_classifier, RoutingSettings, PrivacyDetector\n"
        "build_policy(RoutingSettings()); PrivacyDetector.from_settings(RoutingSettings())\n"
        "load_classifier().score(np.ones(384, dtype=np.float32))\n"
        "print(sorted(m for m in ('sklearn', 'sentence_transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- the labeled prompt set -----------------------------------------------------------------------


def test_prompt_set_is_large_balanced_and_free_of_duplicates() -> None:
    prompts = load_prompts()
    labels = collections.Counter(p.label for p in prompts)
    assert len(prompts) >= 300
    assert labels["edge"] == labels["cloud"]
    normalised = [" ".join(p.text.lower().split()) for p in prompts]
    assert len(set(normalised)) == len(normalised)
    edge_cats = {p.category for p in prompts if p.label == "edge"}
    cloud_cats = {p.category for p in prompts if p.label == "cloud"}
    assert edge_cats == {"factual", "greeting", "definition", "classification", "rewrite", "simple"}
    assert cloud_cats == {"reasoning", "math", "code", "writing", "analysis", "design"}


def test_held_out_split_is_fixed_by_the_text() -> None:
    prompts = load_prompts()
    test, train = select(prompts, "test"), select(prompts, "train")
    assert len(test) + len(train) == len(prompts)
    assert 0.15 <= len(test) / len(prompts) <= 0.25
    assert {p.label for p in test} == {"edge", "cloud"}
    assert is_held_out("What is the capital of Australia?") is is_held_out(
        "  what is the CAPITAL of   australia? "
    )


def test_load_prompts_reports_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        json.dumps({"text": "hi", "label": "edge"}) + "\n" + json.dumps({"text": "x", "label": "gpu"})
    )
    with pytest.raises(ConfigError, match=r"p.jsonl:2: label must be 'edge' or 'cloud', got 'gpu'"):
        load_prompts(path)


def test_unlabeled_prompt_sets(tmp_path: Path) -> None:
    lines = tmp_path / "prompts.txt"
    lines.write_text("first prompt\n\n  second prompt \n")
    assert [(p.text, p.label) for p in load_prompts(lines, require_labels=False)] == [
        ("first prompt", None),
        ("second prompt", None),
    ]
    with pytest.raises(ConfigError, match="2 prompt\\(s\\) in .* have no label"):
        load_prompts(lines)
