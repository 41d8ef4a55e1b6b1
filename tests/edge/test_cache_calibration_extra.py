"""The judged calibration-extra part: calibration only, never a test or a train query."""

from __future__ import annotations

import json
from pathlib import Path

from edge.cache import Judged, split_judged
from edge.cache.judged import calibration_items, load_calibration_extra


def _judged(i: int, query: str, servable: bool = True) -> Judged:
    return Judged(id=f"j{i}", query=query, stored=f"stored {i}", cosine=0.9, servable=servable, qqp_label=None)


def test_calibration_items_add_the_extra_pairs_and_drop_any_query_of_the_judged_set() -> None:
    judged = [_judged(i, f"What is question number {i}?") for i in range(60)]
    parts = split_judged(judged)
    assert {p: len(v) for p, v in parts.items()} == {"train": 17, "calibration": 15, "test": 28}
    test_query = parts["test"][0].query
    train_query = parts["train"][0].query
    extra = [
        _judged(100, "A new question?"),
        _judged(101, "  " + test_query.upper() + " "),  # a test query, written differently
        _judged(102, train_query, servable=False),
        _judged(103, "Another new question?", servable=False),
    ]
    items = calibration_items(judged, extra)
    assert [j.id for j in items] == [j.id for j in parts["calibration"]] + ["j100", "j103"]
    assert calibration_items(judged) == parts["calibration"]


def test_an_extra_file_is_read_whole_whatever_its_query_hash(tmp_path: Path) -> None:
    rows = [{"id": f"c{i}", "query": f"How do I fix problem {i}?", "stored": f"How can I fix problem {i}?",
             "cosine": 0.9, "label": None, "servable": i % 3 == 0, "why": "same"} for i in range(30)]
    path = tmp_path / "calibration_extra.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    extra = load_calibration_extra(path)
    assert [j.id for j in extra] == [f"c{i}" for i in range(30)]
    assert {j.part for j in extra} == {"train", "calibration", "test"}  # the hash is not what places them
    assert len(calibration_items([], extra)) == 30
