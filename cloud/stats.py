"""Recent latencies of a member, for p50s in the pool's status and the router's features."""

from __future__ import annotations

import statistics
from collections import deque


class Window:
    """The last ``size`` samples (milliseconds)."""

    def __init__(self, size: int) -> None:
        self._samples: deque[float] = deque(maxlen=size)
        self._p50: float | None = None  # kept until the next sample: read on every routed request
        self._fresh = True

    def add(self, value: float) -> None:
        self._samples.append(value)
        self._fresh = False

    def p50(self) -> float | None:
        if not self._fresh:
            self._p50 = statistics.median(self._samples)
            self._fresh = True
        return self._p50
