"""Recent latencies of a member, for p50s in the pool's status and the router's features."""

from __future__ import annotations

import statistics
from collections import deque


class Window:
    """The last ``size`` samples (milliseconds)."""

    def __init__(self, size: int) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def add(self, value: float) -> None:
        self._samples.append(value)

    def p50(self) -> float | None:
        return statistics.median(self._samples) if self._samples else None

    def values(self) -> list[float]:
        return list(self._samples)
