"""The replay helper the judged parts are drawn with: each query's nearest stored question above a floor."""

from __future__ import annotations

import numpy as np

from edge.cache.judged import nearest_stored


def unit(*rows: list[float]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_nearest_stored_skips_the_querys_own_text_in_any_case_and_applies_the_floor() -> None:
    stored = ["How do I learn Python?", "HOW DO I LEARN JAVA?", "What is rust?"]
    s = unit([1, 0, 0], [0, 1, 0], [0, 0, 1])
    queries = ["how do i learn java?", "Best way to learn Python?", "Why is the sky blue?"]
    q = unit([0.1, 1, 0.05], [1, 0.2, 0], [0.5, 0.5, 0.7])
    got = list(nearest_stored(queries, stored, q, s, floor=0.8, chunk=2))
    # Query 0's nearest is its own text (other case): the next one, Python, is below the floor.
    # Query 1 takes Python; query 2's nearest (rust, ~0.70) is below the floor.
    assert [(i, k) for i, k, _ in got] == [(1, 0)]
    assert abs(got[0][2] - float(q[1] @ s[0])) < 1e-6


def test_nearest_stored_yields_the_next_stored_question_when_the_own_text_is_nearest() -> None:
    stored = ["What is AI?", "WHAT IS AI?", "Define AI"]
    s = unit([1, 0], [1, 0.01], [1, 0.1])
    got = list(nearest_stored(["What is AI?"], stored, unit([1, 0]), s, floor=0.9))
    assert [(i, k) for i, k, _ in got] == [(0, 2)]  # both case variants of its own text skipped
