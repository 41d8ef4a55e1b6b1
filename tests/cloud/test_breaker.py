"""The circuit breaker's states on a fake clock."""

from __future__ import annotations

from cloud.breaker import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_threshold_consecutive_failures_only() -> None:
    b = CircuitBreaker(3, 5.0, 60.0, Clock())
    assert b.failure() is None and b.failure() is None
    assert b.success() is None  # a success resets the streak
    assert b.failures == 0
    assert b.failure() is None and b.failure() is None
    assert b.failure() == "ejected"
    assert b.state == "open" and not b.available()
    assert b.acquire() == (False, None)


def test_cooldown_then_one_probe_and_readmission() -> None:
    clock = Clock()
    b = CircuitBreaker(1, 5.0, 60.0, clock)
    assert b.failure() == "ejected"
    clock.now += 4.9
    assert not b.available()
    clock.now += 0.2
    assert b.available()
    assert b.acquire() == (True, "half_open")
    assert b.state == "half-open"
    assert b.acquire() == (False, None)  # one probe at a time
    assert b.success() == "readmitted"
    assert b.state == "closed" and b.acquire() == (True, None)


def test_failed_probe_doubles_cooldown_up_to_the_cap() -> None:
    clock = Clock()
    b = CircuitBreaker(1, 5.0, 12.0, clock)
    b.failure()
    for expected in (10.0, 12.0, 12.0):
        clock.now += b.cooldown
        assert b.acquire() == (True, "half_open")
        assert b.failure() is None
        assert b.state == "open" and b.cooldown == expected
    clock.now += 12.0
    b.acquire()
    b.success()
    assert b.cooldown == 5.0


def test_health_checks_move_an_open_circuit_only_after_cooldown() -> None:
    clock = Clock()
    b = CircuitBreaker(2, 5.0, 60.0, clock)
    assert b.health_failed() is None and b.health_failed() == "ejected"
    clock.now += 3.0
    assert b.health_passed() is None and b.state == "open"
    clock.now += 3.0
    assert b.health_failed() is None  # still down: the cooldown starts again
    clock.now += 4.0
    assert b.health_passed() is None
    clock.now += 1.5
    assert b.health_passed() == "half_open"
    assert b.acquire() == (True, None)
    b.release()  # the probe's caller went away: the slot frees, the state stays
    assert b.state == "half-open" and b.available()
