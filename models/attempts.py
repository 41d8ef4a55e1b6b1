"""Key attempts per client address: a sliding window in memory, so keys cannot be guessed fast.

The dashboard's login form counts every POST, right or wrong; the API counts wrong bearer keys
(:func:`models.openai.api_key_guard`). Past ``limit`` attempts in ``window_s`` the answer is 429
with ``Retry-After`` (the seconds until the oldest attempt leaves the window) without looking at
the key. At most ``max_clients`` addresses are remembered; beyond that the
least recently seen are forgotten first, so a flood from many addresses cannot grow the memory.
The address is the connection's peer, or the client a trusted proxy names
(``server.trusted_proxies``): behind a proxy not listed there every browser shares the proxy's.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable


class AttemptLimiter:
    __slots__ = ("_clients", "_clock", "limit", "max_clients", "window_s")

    def __init__(
        self,
        limit: int,
        window_s: float = 60.0,
        *,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_clients = max_clients
        self._clock = clock
        # Address -> times of its attempts in the window; insertion order = least recently seen first.
        self._clients: dict[str, deque[float]] = {}

    def attempt(self, client: str) -> int:
        """Count one attempt from ``client``: 0 when allowed, else the seconds to wait (>= 1)."""
        if self.limit <= 0:
            return 0
        now = self._clock()
        times = self._clients.pop(client, None) or deque()
        self._clients[client] = times  # now the most recently seen
        wait = self._wait(times, now)
        if wait:
            return wait
        times.append(now)
        while len(self._clients) > self.max_clients:
            del self._clients[next(iter(self._clients))]
        return 0

    def wait_s(self, client: str) -> int:
        """The seconds ``client`` must wait before its next attempt counts (0: it may try now);
        counts nothing."""
        times = self._clients.get(client)
        if self.limit <= 0 or not times:
            return 0
        return self._wait(times, self._clock())

    def _wait(self, times: deque[float], now: float) -> int:
        """Drop the attempts that left the window; then the seconds until the oldest one leaves,
        when the window is full (0 otherwise)."""
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if len(times) < self.limit:
            return 0
        return max(1, math.ceil(times[0] + self.window_s - now))

    def __len__(self) -> int:
        return len(self._clients)
