"""The edge's waiting room, fair across keys (the node's tenants).

One FIFO queue per key. A free slot goes to the waiting key with the fewest running requests,
ties broken round robin (the key served longest ago first): a key that bursts fills its own
queue, and another key's next request takes the next slot that frees, until both run an equal
share of the slots (max-min fairness). A burst is refused at its key's share of the queue bound
while the other keys are still admitted.

The same turn-taking serves the node's other shared queues: the prompt budget of a step
(:func:`prefill_shares`), the texts of an embedding run (:func:`edge.embedder.pick_run`) and
the cache's lookups (:class:`FairRunner`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar


# Keys whose turn is remembered after their queue emptied.
_REMEMBERED = 4096


def _forget_oldest(d: dict[str, Any], keep: int) -> None:
    """Drop the first-inserted keys of ``d`` beyond ``keep`` (re-inserted ones count as new)."""
    while len(d) > keep:
        del d[next(iter(d))]


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


J = TypeVar("J", bound=_Keyed)
R = TypeVar("R")


class FairQueue(Generic[J]):
    """Waiting jobs per key; not thread-safe (the scheduler holds its lock around every call)."""

    def __init__(self) -> None:
        self._queues: dict[str, collections.deque[J]] = {}
        # The round-robin turn: when each key was last served (a key never served goes first).
        # Kept after a key's queue empties, so a key that comes back does not jump the turn;
        # bounded, the longest-unserved forgotten first.
        self._served: dict[str, int] = {}
        self._tick = 0

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def __bool__(self) -> bool:
        return bool(self._queues)  # a key's queue is dropped when it empties

    def count(self, key: str) -> int:
        queue = self._queues.get(key)
        return len(queue) if queue is not None else 0

    def keys(self) -> list[str]:
        return list(self._queues)

    def push(self, job: J) -> None:
        self._queues.setdefault(job.key, collections.deque()).append(job)

    def push_front(self, job: J) -> None:
        """Queue ``job`` first of its key (a job that gave up its slot goes back before the rest)."""
        self._queues.setdefault(job.key, collections.deque()).appendleft(job)

    def peek(self, running: Mapping[str, int]) -> str | None:
        """The key :meth:`pop` would serve: the fewest ``running``, then the one served longest ago."""
        served = self._served
        return min(self._queues, key=lambda k: (running.get(k, 0), served.get(k, -1)), default=None)

    def pop(self, running: Mapping[str, int]) -> J | None:
        """The next job, of the key :meth:`peek` names."""
        best = self.peek(running)
        if best is None:
            return None
        queue = self._queues[best]
        job = queue.popleft()
        if not queue:
            del self._queues[best]
        self._tick += 1
        self._served.pop(best, None)
        self._served[best] = self._tick  # insertion order = oldest stamp first
        _forget_oldest(self._served, _REMEMBERED)
        return job

    def clear(self) -> list[J]:
        jobs = [job for queue in self._queues.values() for job in queue]
        self._queues = {}
        self._served = {}
        return jobs

    def ahead(self, key: str) -> int:
        """Waiting jobs served before a new one of ``key``: its own queue, and from every other
        key at most as many (round robin takes one of each in turn)."""
        mine = self.count(key)
        return mine + sum(min(len(q), mine + 1) for k, q in self._queues.items() if k != key)


def active_keys(queue: FairQueue[J], running: Mapping[str, int], key: str) -> int:
    """Keys with work (waiting or running), ``key`` counted as one of them."""
    active = {k for k, n in running.items() if n > 0}
    active.update(queue.keys())
    active.add(key)
    return len(active)


# A key whose requests in flight peaked within this many seconds still counts as one that may
# come back with as many.
RECENT_S = 30.0


class Demand:
    """Each key's recent peak of requests in flight (running + waiting, the new one counted).

    The peak is kept while it is reached again within :data:`RECENT_S`, then falls to the
    current figure: a tenant whose four clients ask one after another keeps a demand of four
    between its requests, and one that went quiet stops counting.
    """

    def __init__(self) -> None:
        self._peak: dict[str, tuple[int, float]] = {}

    def note(self, key: str, in_flight: int, now: float) -> None:
        peak, stamp = self._peak.pop(key, (0, -math.inf))
        if now - stamp >= RECENT_S or in_flight >= peak:
            peak, stamp = in_flight, now
        self._peak[key] = (peak, stamp)  # re-inserted: the least recently noted go first
        _forget_oldest(self._peak, _REMEMBERED)

    def recent(self, now: float) -> dict[str, int]:
        """Keys with a peak reached within :data:`RECENT_S`, and that peak."""
        return {k: peak for k, (peak, stamp) in self._peak.items() if now - stamp < RECENT_S}


def keep_slots(key: str, running: Mapping[str, int], free: int, slots: int, demand: Mapping[str, int]) -> bool:
    """Whether the free slots stay free instead of one going to ``key`` (that runs some already).

    The slots another recently active key is short of, up to its fair share and its recent demand,
    are kept for it: its next requests start at once, not after a burst's long answers. A key
    alone is never held back (the edge stays work-conserving), nor one running nothing.
    """
    if running.get(key, 0) == 0:
        return False
    others = {k: d for k, d in demand.items() if k != key}
    if not others:
        return False
    fair = share(slots, len(others) + 1)
    reserve = sum(max(0, min(fair, d) - running.get(k, 0)) for k, d in others.items())
    return free <= reserve


def prefill_shares(pending: Mapping[str, int], budget: int) -> dict[str, int]:
    """Split one step's ``budget`` of prompt tokens across keys with prompts to read (``pending``:
    each key's prompt tokens still to evaluate), max-min fair (water filling), so a key's burst of
    short prompts cannot take every step's budget.

    Each key gets an equal part, a key needing less gives the rest back to the others, and no
    token of the budget is left unused while any key has work. Ties of the remainder go to keys
    in the order given.
    """
    want = {k: n for k, n in pending.items() if n > 0}
    out = {k: 0 for k in want}
    left = max(0, budget)
    while want and left > 0:
        part, extra = divmod(left, len(want))
        given = 0
        for i, (k, n) in enumerate(list(want.items())):
            take = min(n, part + (1 if i < extra else 0))
            out[k] += take
            given += take
            if take == n:
                del want[k]
            else:
                want[k] = n - take
        left -= given  # each round gives at least one token: left > 0 and some key wants more
    return out


def preempt_from(key: str, running: Mapping[str, int], slots: int, keys: int) -> str | None:
    """The key that gives up a slot so that ``key`` (waiting, none free) gets one, or None.

    Only a key below its fair part of the slots takes one, only from the key furthest above
    its part: slots are not preempted for a key already at its share, nor from one at its own,
    so two keys cannot take a slot back and forth.
    """
    fair = slots // max(1, keys)
    if running.get(key, 0) >= fair:
        return None
    victim = max((k for k in running if k != key), key=lambda k: running[k], default=None)
    if victim is None or running[victim] <= max(fair, 1):
        return None
    return victim


def share(bound: int, keys: int) -> int:
    """One key's part of a queue bound shared by ``keys`` (at least one request)."""
    return max(1, math.ceil(bound / max(1, keys)))


@dataclass(frozen=True, slots=True)
class KeyView:
    """The edge as one key (tenant) sees it: what a new request of that key would wait behind."""

    running: int
    ahead: int  # waiting requests served before a new one of this key (fair order)
    slots: int
    keys: int  # keys with work, this one counted
    waiting: int  # this key's own waiting requests
    mean_request_s: float | None

    def wait_s(self) -> float | None:
        """Seconds until a new request of this key gets a slot (0: one is free; None: no estimate)."""
        ahead = self.running + self.ahead  # running or served first
        if ahead < self.slots:
            return 0.0
        if self.mean_request_s is None:
            return None
        # Every slot frees about once per mean request time.
        return (ahead - self.slots + 1) * self.mean_request_s / self.slots

    def room_s(self, share_of_queue: int) -> float:
        """Seconds until this key's queue is below ``share_of_queue`` again (a refused client's
        retry-after): its own jobs get about ``slots / keys`` of the slots."""
        if self.mean_request_s is None:
            return 1.0
        over = self.waiting - share_of_queue + 1
        return max(1.0, over * self.step_s())

    def step_s(self) -> float:
        """Seconds between two of this key's jobs getting a slot (it gets ``slots / keys``)."""
        return (self.mean_request_s or 1.0) * self.keys / self.slots


class Promises:
    """When each key's refused requests were told to come back, so that those refused together
    are told different times (each the slot after the previous one's), not all the same second."""

    def __init__(self) -> None:
        self._due: dict[str, float] = {}

    def retry_after_s(self, key: str, earliest_s: float, step_s: float, now: float) -> float:
        due = max(now + earliest_s, self._due.pop(key, -math.inf) + step_s)
        self._due[key] = due
        _forget_oldest(self._due, _REMEMBERED)
        return due - now


@dataclass(eq=False, slots=True)
class _Call:
    key: str
    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


class FairRunner:
    """Blocking calls run one at a time on a thread of their own, taken round robin across keys:
    unlike a single-thread executor's first come, first served, a key's next call waits for at
    most one call of each other key with work (a tenant's burst of cache lookups cannot hold
    another tenant's one lookup)."""

    def __init__(self, name: str) -> None:
        self._queue: FairQueue[_Call] = FairQueue()
        self._lock = threading.Lock()
        # Each call queues one task, which runs whichever call's turn it is then.
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, key: str, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` on the runner's thread, in ``key``'s turn."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._lock:
            self._executor.submit(self._run_next)  # a RuntimeError once shut down
            self._queue.push(_Call(key, functools.partial(fn, *args), loop, future))
        return await future

    def shutdown(self) -> None:
        """Stop taking calls and wait until the waiting ones ran (their callers are awaiting them)."""
        self._executor.shutdown(wait=True)

    def _run_next(self) -> None:
        with self._lock:
            call = self._queue.pop({})
        assert call is not None  # one task a call
        if call.future.cancelled():  # the caller left (a client gone): skip its work
            return
        try:
            result, error = call.fn(), None
        except BaseException as exc:  # handed to the caller, as an executor does
            result, error = None, exc
        try:
            call.loop.call_soon_threadsafe(_settle, call.future, result, error)
        except RuntimeError:  # the caller's loop is closed: nobody waits for it
            pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
