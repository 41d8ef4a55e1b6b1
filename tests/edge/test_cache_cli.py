"""`edgeroute cache ...` through the real command line (typer's runner, real files)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from edge.cli import cache_app

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


def test_calibrate_on_a_small_pairs_file(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    rows = [
        ("How do I reset my password?", "How can I reset my password?", True),
        ("How do I fix a flat tire?", "How can I fix a flat tire?", True),
        ("How do I install Docker on Ubuntu?", "How can I install Docker on Ubuntu?", True),
        ("How do I turn on dark mode?", "How do I turn off dark mode?", False),
        ("What is the capital of France?", "What is the capital of Germany?", False),
    ]
    pairs.write_text("".join(json.dumps({"a": a, "b": b, "duplicate": d}) + "\n" for a, b, d in rows))
    out = tmp_path / "cal.json"
    r = runner.invoke(
        cache_app, ["calibrate", "--pairs", str(pairs), "--split", "all", "--precision", "0.9", "--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert (result["pairs"], result["positives"]) == (5, 3)
    # min_served guards against deciding on a handful of pairs: 5 pairs cannot calibrate
    assert result["threshold"] is None and r.exit_code == 1
    assert "no threshold reaches precision 0.9" in r.output


def test_stats_on_an_unreadable_file_fails_cleanly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"x" * 4096)
    r = runner.invoke(cache_app, ["stats", "--db", str(bad)])
    assert r.exit_code == 1 and "error: cannot" in r.output
