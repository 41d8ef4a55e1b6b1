"""The classifier on real all-MiniLM-L6-v2 embeddings, and the train / eval / calibrate commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from edgeroute.cli import app
from router.policy import RoutingSettings, build_policy, load_classifier
from router.training.dataset import LabeledPrompt, load_prompts, select
from router.training.embed import count_tokens, embed_texts
from router.training.evaluate import evaluate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def held_out() -> tuple[list[LabeledPrompt], np.ndarray]:
    prompts = select(load_prompts(), "test")
    return prompts, embed_texts([p.text for p in prompts])


def test_embeddings_are_normalised_384_d(held_out: tuple[list[LabeledPrompt], np.ndarray]) -> None:
    prompts, x = held_out
    assert x.shape == (len(prompts), 384) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


def test_held_out_accuracy_of_the_shipped_classifier(
    held_out: tuple[list[LabeledPrompt], np.ndarray],
) -> None:
    prompts, x = held_out
    predicted = load_classifier().score_batch(x) >= 0.5
    truth = np.array([p.label == "cloud" for p in prompts])
    assert float((predicted == truth).mean()) >= 0.90


def test_hybrid_policy_routes_the_held_out_set(held_out: tuple[list[LabeledPrompt], np.ndarray]) -> None:
    prompts, x = held_out
    report = evaluate(
        prompts,
        x,
        count_tokens([p.text for p in prompts]),
        load_classifier(),
        build_policy(RoutingSettings()),
        threshold=0.5,
        repeats=1,
    )
    assert report.labeled == len(prompts)
    assert report.accuracy is not None and report.accuracy >= 0.90
    assert set(report.reasons) <= {"complex", "simple"}
    assert report.decision_samples == len(prompts)


def _small_set(path: Path, per_label: int) -> list[LabeledPrompt]:
    prompts = load_prompts()
    chosen = [p for p in prompts if p.label == "edge"][::20][:per_label]
    chosen += [p for p in prompts if p.label == "cloud"][::20][:per_label]
    path.write_text("".join(json.dumps({"text": p.text, "label": p.label}) + "\n" for p in chosen))
    return chosen


def test_cli_train_writes_weights_that_load(tmp_path: Path) -> None:
    data = tmp_path / "small.jsonl"
    _small_set(data, 12)
    out = tmp_path / "weights.json"
    result = CliRunner().invoke(app, ["router", "train", "--prompts", str(data), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["n_train"] + report["n_test"] == 24
    assert report["out"] == str(out)
    clf = load_classifier(out)
    assert clf.meta["n_train"] == report["n_train"] and clf.dim == 384


def test_cli_eval_prints_and_writes_the_report(tmp_path: Path) -> None:
    data = tmp_path / "small.jsonl"
    _small_set(data, 5)
    out = tmp_path / "eval.json"
    result = CliRunner().invoke(
        app, ["router", "eval", "--prompts", str(data), "--out", str(out), "--repeats", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "(all split, 10 prompts, 10 labeled)" in result.stdout
    assert "decision p50" in result.stdout
    report = json.loads(out.read_text())
    assert (report["split"], report["n"], report["policy"], report["decision_samples"]) == (
        "all",
        10,
        "hybrid",
        20,
    )
    assert report["label_cloud_share"] == 0.5
    assert sum(report["confusion"].values()) == 10


def test_cli_calibrate_on_a_prompt_file(tmp_path: Path) -> None:
    data = tmp_path / "prompts.txt"
    chosen = _small_set(tmp_path / "unused.jsonl", 5)
    data.write_text("\n".join(p.text for p in chosen))
    result = CliRunner().invoke(
        app, ["router", "calibrate", "--target-cloud-share", "0.3", "--prompts", str(data), "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["n"], out["achieved_share"], out["target_share"]) == (10, 0.3, 0.3)
    assert 0.0 < out["threshold"] < 1.0
