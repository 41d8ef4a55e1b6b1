"""`edgeroute cache ...` through the real command line (typer's runner, real files)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgeroute.cli import cache_app  # with the verifier commands router.training adds

runner = CliRunner()


def test_warm_stats_export_clear(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    warm = tmp_path / "w.jsonl"
    warm.write_text(
        '{"prompt": "How do I reset my password?", "answer": "Settings."}\n'
        '{"prompt": "Opening hours?", "answer": "9-5", "tenant": "shop"}\n'
    )
    r = runner.invoke(cache_app, ["warm", str(warm), "--db", str(db)])
    assert r.exit_code == 0 and "stored 2 entries" in r.output
    r = runner.invoke(cache_app, ["stats", "--db", str(db), "--json"])
    stats = json.loads(r.output)
    assert (stats["entries"], stats["tenants"], stats["by_tier"], stats["counters"]) == (
        2, 2, {"warmup": 2}, {"stores": 2}
    )
    out = tmp_path / "export.jsonl"
    r = runner.invoke(cache_app, ["export", "--db", str(db), "--tenant", "shop", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["tenant"], x["answer"], x["tier"]) for x in rows] == [("shop", "9-5", "warmup")]
    r = runner.invoke(cache_app, ["clear", "--db", str(db), "-y"])
    assert r.exit_code == 0 and "deleted 2 entries" in r.output


TOPICS = ("Python", "Java", "guitar", "chess", "French", "cooking", "swimming", "painting", "Excel", "Docker",
          "photography", "statistics")


def _tiny_judged(path: Path) -> None:
    rows = []
    for n, topic in enumerate(TOPICS):
        stored = f"How do I learn {topic}?"
        rows.append({"id": f"p{n}", "query": f"How can I learn {topic}?", "stored": stored, "servable": True})
        rows.append({"id": f"n{n}", "query": f"How do I learn {topic} for kids?", "stored": stored,
                     "servable": False})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow  # a real (tiny) fine-tune and ONNX export: about a minute on 2 cores
def test_train_verifier_on_a_tiny_set_writes_loadable_files(tmp_path: Path) -> None:
    from edge.cache import Verifier

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(
        json.dumps({"a": f"How do I learn {t}?", "b": f"What is the best way to learn {t}?", "duplicate": True})
        + "\n" + json.dumps({"a": f"How do I learn {t}?", "b": f"Why should I learn {t}?", "duplicate": False})
        + "\n" for t in TOPICS
    ))
    judged = tmp_path / "judged.jsonl"
    _tiny_judged(judged)
    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(
        json.dumps({"id": f"t{n}", "query": f"How can I get better at {t}?", "stored": f"How do I improve at {t}?",
                    "servable": True}) + "\n" for n, t in enumerate(TOPICS[:3])
    ))
    out = tmp_path / "data" / "verifier"  # no --out-dir: the data directory's verifier/, never the package
    r = runner.invoke(cache_app, [
        "train-verifier", "--pairs", str(pairs), "--judged", str(judged), "--data-dir", str(tmp_path / "data"),
        "--steps1", "2", "--steps2", "2", "--layers", "1", "--batch", "4", "--generated", "12", "--threads", "1",
        "--train-extra", str(extra), "--pos-weight", "0.5",
    ])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["verifier-tokenizer.json", "verifier.json", "verifier.onnx"]
    assert "threshold" in r.output and "precision" in r.output  # the calibration curve
    v = Verifier.load(out)
    assert [ph["steps"] for ph in v.meta["phases"]] == [2, 2] and v.meta["phases"][0]["layers"] == 1
    assert [ph["pos_weight"] for ph in v.meta["phases"]] == [1.0, 0.5]  # phase 2's only
    assert v.replay is not None and len(v.replay.scores) == v.meta["judged"]["calibration"] > 0
    assert v.meta["judged"]["train_extra"] == 3  # training only: the calibration replay is the judged part's
    assert v.meta["examples"]["judged"] == v.meta["judged"]["train"] + 3
    p = v.probabilities("How can I learn chess?", ["How do I learn chess?", "How do I learn chess for kids?"],
                        [0.97, 0.9])
    assert p.shape == (2,) and ((p > 0) & (p < 1)).all()


@pytest.mark.slow  # two real (tiny) fine-tunes
def test_a_lower_pos_weight_scores_servable_pairs_lower(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from router.training.finetune import Example, FinetuneConfig, finetune

    examples = [Example(f"How do I learn {t}?", f"What is the best way to learn {t}?", True, "qqp") for t in TOPICS]
    examples += [Example(f"How do I learn {t}?", f"Why should I learn {t}?", False, "qqp") for t in TOPICS]
    cfg = FinetuneConfig(layers=1, steps=6, batch=8, lr=5e-4, warmup=0.0, threads=1, mix=(("qqp", 1.0),))
    means = []
    for weight in (1.0, 0.05):
        out = tmp_path / str(weight)
        finetune(examples, replace(cfg, pos_weight=weight), out)  # same seed: the same batches
        tok, model = AutoTokenizer.from_pretrained(out), AutoModelForSequenceClassification.from_pretrained(out)
        enc = tok([e.query for e in examples], [e.stored for e in examples], padding=True, return_tensors="pt")
        with torch.no_grad():
            means.append(float(model(**enc).logits.mean()))
    assert means[1] < means[0] - 0.1


def test_calibrate_on_a_small_judged_file(tmp_path: Path) -> None:
    judged = tmp_path / "judged.jsonl"
    _tiny_judged(judged)
    out = tmp_path / "cal.json"
    r = runner.invoke(cache_app, ["calibrate", "--judged", str(judged), "--out", str(out)])
    result = json.loads(out.read_text())
    from edge.cache import load_judged, split_judged

    cal = split_judged(load_judged(judged))["calibration"]
    assert (result["pairs"], result["positives"]) == (len(cal), sum(j.servable for j in cal))
    # min_served guards against deciding on a handful of pairs: a few pairs cannot calibrate
    assert result["threshold"] is None and r.exit_code == 1
    assert "no threshold keeps wrong hits under 0.03 (0.05 x calibration_margin)" in r.output


def test_stats_on_an_unreadable_file_fails_cleanly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"x" * 4096)
    r = runner.invoke(cache_app, ["stats", "--db", str(bad)])
    assert r.exit_code == 1 and "error: cannot" in r.output


def test_calibrate_adds_the_calibration_extra_pairs_and_takes_the_confidence(tmp_path: Path) -> None:
    judged = tmp_path / "judged.jsonl"
    _tiny_judged(judged)
    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(
        json.dumps({"id": f"c{n}", "query": f"How can I get better at {t}?", "stored": f"How do I improve at {t}?",
                    "servable": n != 1}) + "\n" for n, t in enumerate(TOPICS[:3])
    ))
    out = tmp_path / "cal.json"
    r = runner.invoke(cache_app, ["calibrate", "--judged", str(judged), "--calibration-extra", str(extra),
                                  "--confidence", "0.9", "--bound", "clopper-pearson", "--out", str(out)])
    result = json.loads(out.read_text())
    from edge.cache import load_judged, split_judged

    cal = split_judged(load_judged(judged))["calibration"]
    assert (result["pairs"], result["positives"]) == (len(cal) + 3, sum(j.servable for j in cal) + 2)
    assert (result["confidence"], result["bound"]) == (0.9, "clopper-pearson")
    assert r.exit_code == 1  # still too few to serve with confidence
    bad = runner.invoke(cache_app, ["calibrate", "--judged", str(judged), "--bound", "bayes"])
    assert bad.exit_code == 2 and "budget_bound" in bad.output


def test_calibrate_writes_only_into_the_verifier_dir_given(tmp_path: Path) -> None:
    import hashlib
    import shutil
    from importlib import resources

    from edge.cache import load_judged, split_judged

    judged = tmp_path / "judged.jsonl"
    _tiny_judged(judged)
    shipped = Path(str(resources.files("edge.cache") / "data"))
    before = hashlib.sha256((shipped / "verifier.json").read_bytes()).hexdigest()
    r = runner.invoke(cache_app, ["calibrate", "--judged", str(judged), "--write"])
    assert r.exit_code == 2 and "--write needs --verifier-dir" in r.output
    mine = tmp_path / "v"
    mine.mkdir()
    for name in ("verifier.onnx", "verifier-tokenizer.json", "verifier.json"):
        shutil.copy(shipped / name, mine / name)
    r = runner.invoke(cache_app, ["calibrate", "--judged", str(judged), "--verifier-dir", str(mine), "--write"])
    assert r.exit_code == 1, r.output  # too few pairs for a threshold, but the replay is written
    doc = json.loads((mine / "verifier.json").read_text())
    cal = split_judged(load_judged(judged))["calibration"]
    assert doc["meta"]["judged"]["calibration"] == len(cal)
    assert doc["meta"]["operating_point"]["threshold"] is None
    assert hashlib.sha256((shipped / "verifier.json").read_bytes()).hexdigest() == before


def test_without_a_checkout_the_judged_set_must_be_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed wheel has no data/judged/: the commands say to pass --judged instead of guessing."""
    from edge.cache import judged as judged_module
    from edge.errors import CacheError

    monkeypatch.setattr(judged_module, "REPO_JUDGED", tmp_path / "absent")
    with pytest.raises(CacheError, match="give --judged DIR"):
        judged_module.load_judged()
    r = runner.invoke(cache_app, ["calibrate"])
    assert r.exit_code == 1 and "the judged set is not part of the installed package" in r.output
    mine = tmp_path / "judged.jsonl"
    _tiny_judged(mine)
    assert len(judged_module.load_judged(mine)) == 2 * len(TOPICS)  # a given set needs no checkout
