"""The garbage collector's pauses: the start-up heap frozen, every collection timed.

A full (generation 2) collection walks every tracked object and holds the GIL, so the event loop
and every thread stop for it. After the node has loaded its models, libraries and settings the
heap holds ~95,000 objects that live as long as the process; walking them cost a full
collection 56-103 ms on a busy 2-core VM, which a cache hit that happened to trigger it waited out.
``gc.freeze()`` moves them to a permanent generation that collections skip; only what requests
allocate afterwards is walked.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

Observe = Callable[[int, float], None]


class GcWatch:
    """Times each collection (``observe(generation, seconds)``); optionally freezes the heap first.

    One per process at a time makes sense (the collector is process-wide); a second one only adds
    a second observer. ``close`` undoes what ``start`` did, so a process that opens and closes
    nodes (the tests) is left as it was.
    """

    def __init__(self, observe: Observe) -> None:
        self._observe = observe
        self._started: float | None = None
        self._frozen = False
        self._active = False

    def start(self, *, freeze: bool) -> None:
        if freeze:
            gc.collect()  # what is garbage now should not be kept for ever
            gc.freeze()
            self._frozen = True
        gc.callbacks.append(self._callback)
        self._active = True

    def close(self) -> None:
        if self._active:
            gc.callbacks.remove(self._callback)
            self._active = False
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    def __enter__(self) -> GcWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self._observe(int(info.get("generation", 0)), time.perf_counter() - self._started)
            self._started = None
