"""bench.overhead's interval of the median of the paired differences."""

from __future__ import annotations

import statistics

from bench.overhead import median_interval


def test_equal_rounds_give_a_point_interval() -> None:
    assert median_interval([2.5] * 40) == (2.5, 2.5)


def test_the_interval_brackets_the_median_is_seeded_and_widens_with_the_spread() -> None:
    base = [((i * 37) % 101) / 100 for i in range(301)]  # 101 distinct values in [0, 1]
    tight = [3.0 + 0.01 * b for b in base]
    spread = [3.0 + b for b in base]
    low, high = median_interval(spread)
    assert low <= statistics.median(spread) <= high
    assert median_interval(spread) == (low, high)
    t_low, t_high = median_interval(tight)
    assert t_high - t_low < high - low
