"""A circuit breaker per member: closed -> open after consecutive failures -> half-open probe -> closed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

Circuit = Literal["closed", "open", "half-open"]
Transition = Literal["ejected", "half_open", "readmitted"]


class CircuitBreaker:
    """Counts consecutive failures; while open, the member gets no traffic until its cooldown ends.

    After the cooldown one probe (a health check's success, or one real request) decides: success
    closes the circuit, failure reopens it with a doubled cooldown (up to ``max_cooldown_s``).
    """

    def __init__(
        self,
        threshold: int,
        cooldown_s: float,
        max_cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.base_cooldown = cooldown_s
        self.max_cooldown = max(max_cooldown_s, cooldown_s)
        self._clock = clock
        self.state: Circuit = "closed"
        self.failures = 0  # consecutive
        self.cooldown = cooldown_s
        self._opened_at = 0.0
        self._probing = False

    def cooled(self) -> bool:
        """An open circuit whose cooldown has passed (ready for a probe)."""
        return self.state == "open" and self._clock() - self._opened_at >= self.cooldown

    def available(self) -> bool:
        """Whether a request may be sent now (without taking the probe slot)."""
        if self.state == "closed":
            return True
        if self.state == "half-open":
            return not self._probing
        return self.cooled()

    def acquire(self) -> tuple[bool, Transition | None]:
        """Take a request slot: (allowed, transition); an open, cooled circuit turns half-open."""
        if self.state == "closed":
            return True, None
        if not self.available():
            return False, None
        transition: Transition | None = "half_open" if self.state == "open" else None
        self.state, self._probing = "half-open", True
        return True, transition

    def success(self) -> Transition | None:
        self.failures = 0
        self._probing = False
        if self.state != "closed":
            self.state = "closed"
            self.cooldown = self.base_cooldown
            return "readmitted"
        return None

    def failure(self) -> Transition | None:
        self.failures += 1
        if self.state == "half-open":
            self._probing = False
            self._open(min(self.cooldown * 2, self.max_cooldown))
            return None
        if self.state == "closed" and self.failures >= self.threshold:
            self._open(self.base_cooldown)
            return "ejected"
        return None

    def release(self) -> None:
        """A probe ended without a verdict (the caller went away)."""
        self._probing = False

    def health_passed(self) -> Transition | None:
        """An active health check passed: a cooled open circuit becomes half-open (a real request decides)."""
        if self.cooled():
            self.state = "half-open"
            self._probing = False
            return "half_open"
        return None

    def health_failed(self) -> Transition | None:
        """An active health check failed: counts as a failure; an open circuit waits another cooldown."""
        if self.state == "open":
            self._opened_at = self._clock()
            return None
        return self.failure()

    def _open(self, cooldown: float) -> None:
        self.state = "open"
        self.cooldown = cooldown
        self._opened_at = self._clock()
