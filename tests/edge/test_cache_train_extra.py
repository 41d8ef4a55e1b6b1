"""The judged train-extra part: loaded for training only, never into the calibration or test parts."""

from __future__ import annotations

import json
from pathlib import Path

from edge.cache import load_judged, split_judged
from edge.cache.judged import default_dir, load_calibration_extra, load_train_extra


def test_the_shipped_judged_directory_does_not_read_the_train_extra_pairs() -> None:
    shipped = load_judged()
    extra = load_train_extra()
    assert len(shipped) == 2000  # judged.jsonl alone: the calibration and test parts are unchanged
    assert {p: len(v) for p, v in split_judged(shipped).items()} == {"train": 674, "calibration": 529, "test": 797}
    assert len(extra) == 1600 and sum(j.servable for j in extra) == 978
    texts = {t for j in shipped for t in (j.query.lower(), j.stored.lower())}
    assert not any(j.query.lower() in texts or j.stored.lower() in texts for j in extra)
    assert (default_dir() / "train_extra" / "train_extra.jsonl").is_file()


def test_a_train_extra_file_keeps_every_pair_whatever_its_query_hash(tmp_path: Path) -> None:
    rows = [{"id": f"t{i}", "query": f"How do I learn topic {i}?", "stored": f"How can I learn topic {i}?",
             "cosine": 0.9, "label": None, "servable": i % 2 == 0} for i in range(40)]
    rows.append(dict(rows[0], id="dup"))  # the same pair twice keeps its first verdict
    path = tmp_path / "extra.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    extra = load_train_extra(path)
    assert [j.id for j in extra] == [f"t{i}" for i in range(40)]
    assert [j.servable for j in extra] == [i % 2 == 0 for i in range(40)]
    # A hash split would have sent some of them to calibration and test; training takes them all.
    assert {j.part for j in extra} == {"train", "calibration", "test"}


def test_train_extra_2_is_opt_in_and_shares_no_text_with_the_judged_calibration_or_first_extra_parts() -> None:
    folder = default_dir() / "train_extra_2"
    second = load_train_extra(folder)
    assert len(second) == 7200 and sum(j.servable for j in second) == 4285
    assert {j.id[0] for j in second} == {"u", "v", "w"}
    # Not read by default: the shipped verifier was trained without it (docs/cache.md says why).
    assert not {(j.query, j.stored) for j in second} & {(j.query, j.stored) for j in load_train_extra()}
    others = [*load_judged(), *load_train_extra(), *load_calibration_extra()]
    texts = {t.lower() for j in others for t in (j.query, j.stored)}
    assert not any(j.query.lower() in texts or j.stored.lower() in texts for j in second)


def test_train_extra_hard_is_opt_in_and_shares_no_text_with_the_judged_or_calibration_parts() -> None:
    hard = load_train_extra(default_dir() / "train_extra_hard")
    assert len(hard) == 2400 and sum(j.servable for j in hard) == 1925
    assert {j.id[0] for j in hard} == {"h"}
    judged_before = [*load_train_extra(), *load_train_extra(default_dir() / "train_extra_2")]
    assert not {(j.query, j.stored) for j in hard} & {(j.query, j.stored) for j in judged_before}
    texts = {t.lower() for j in [*load_judged(), *load_calibration_extra()] for t in (j.query, j.stored)}
    assert not any(j.query.lower() in texts or j.stored.lower() in texts for j in hard)


def test_the_assistant_part_is_opt_in_and_shares_no_text_with_the_benchmark_or_judged_sets() -> None:
    assistant = load_train_extra(default_dir() / "train_extra_assistant")
    assert len(assistant) == 1711 and sum(j.servable for j in assistant) == 673
    assert not {(j.query, j.stored) for j in assistant} & {(j.query, j.stored) for j in load_train_extra()}

    def norm(text: str) -> str:
        return " ".join(text.lower().split()).strip(" ?.!")

    bench_data = Path(__file__).resolve().parents[2] / "bench" / "data"
    benched = [json.loads(line) for name in ("ood_pairs.jsonl", "ood_val_pairs.jsonl")
               for line in (bench_data / name).read_text(encoding="utf-8").splitlines()]
    assert len(benched) == 900
    texts = {norm(r[k]) for r in benched for k in ("stored", "query")}
    texts |= {norm(t) for j in [*load_judged(), *load_calibration_extra()] for t in (j.query, j.stored)}
    assert not any(norm(j.query) in texts or norm(j.stored) in texts for j in assistant)


def test_the_unseen_qqp_sample_shares_no_text_with_any_other_judged_set_and_each_candidate_was_read() -> None:
    import pytest

    from bench.cache import DEFAULT_PAIRS
    from bench.cache_holdout import unseen_asked, unseen_set

    if not DEFAULT_PAIRS.is_file():
        pytest.skip("the QQP pairs live in ../shared/data")
    stored, asked, read = unseen_set(DEFAULT_PAIRS)
    assert (len(stored), len(asked), len(read), sum(j.servable for j in read)) == (16806, 17097, 1946, 743)
    # The whole stream: the same questions in the same order, with the 205 that are a stored question's own text.
    own = {s.lower() for s in stored}
    every = unseen_asked(DEFAULT_PAIRS)
    assert [q for q in every if q.lower() not in own] == asked
    assert sum(q.lower() in own for q in every) == 205
    assert {j.id[0] for j in read} == {"u"}
    stored_set, asked_set = set(stored), set(asked)
    assert all(j.query in asked_set and j.stored in stored_set for j in read)
    root = default_dir()
    others = [*load_judged(), *load_train_extra(), *load_calibration_extra(),
              *(j for d in ("train_extra_2", "train_extra_hard", "train_extra_assistant") for j in load_train_extra(root / d))]
    texts = {t.lower() for j in others for t in (j.query, j.stored)}
    assert not any(t.lower() in texts for t in [*stored, *asked])
