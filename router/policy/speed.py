"""How soon each side would give this request its first token, learnt from the node's own answers.

Each side (the edge, every cloud member) has a small least-squares model of the time from the
routing decision to the first token on its live state, refitted from its recent streamed answers
(the caller adds the time the request has already spent):

- the edge: the prompt's tokens, the requests decoding, the edge's own estimate of the wait
  for a slot (:meth:`edge.LlamaEngine.prepare`);
- a member: the prompt's tokens and the member's depth (this node's requests in flight plus the
  others vLLM's ``/metrics`` reports), the round trip in the intercept.

A side with too few answers yet has no prediction (None): the policy then decides as if it were
fast, so an idle node routes as it always did.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

# Enough answers to fit the few coefficients; a window short enough to follow a change of load.
MIN_SAMPLES = 12
WINDOW = 200
_RIDGE = 1e-3  # keeps a fit with a constant feature (no load seen yet) well posed


class FirstTokenModel:
    """Seconds to the first token as a linear function of a side's state, fitted online."""

    def __init__(self, window: int = WINDOW, min_samples: int = MIN_SAMPLES) -> None:
        self._xs: deque[tuple[float, ...]] = deque(maxlen=window)
        self._ys: deque[float] = deque(maxlen=window)
        self._min = min_samples
        self._coef: np.ndarray | None = None
        self._floor = 0.0
        self._lock = threading.Lock()

    def observe(self, x: Sequence[float], seconds: float) -> None:
        with self._lock:
            self._xs.append(tuple(x))
            self._ys.append(seconds)
            if len(self._ys) < self._min:
                return
            a = np.column_stack([np.ones(len(self._xs)), np.asarray(self._xs, dtype=float)])
            y = np.asarray(self._ys, dtype=float)
            # Each answer weighted by 1/seconds: the fit minimises the relative error, so the
            # many quick answers are not traded away for the few long waits.
            w = 1.0 / np.maximum(y, 1e-3)
            a, yw = a * w[:, None], y * w
            # Scaled columns: prompt tokens (hundreds) and queue lengths (units) weigh alike in the ridge.
            scale = np.maximum(np.abs(a).max(axis=0), 1e-9)
            an = a / scale
            coef = np.linalg.solve(an.T @ an + _RIDGE * np.eye(an.shape[1]), an.T @ yw)
            self._coef = coef / scale
            # No state answers faster than the fastest answer seen: a fit never predicts below it.
            self._floor = float(y.min())

    def predict(self, x: Sequence[float]) -> float | None:
        """Seconds, or None before ``min_samples`` answers."""
        coef = self._coef
        if coef is None:
            return None
        return max(self._floor, float(coef[0] + np.dot(coef[1:], x)))

    @property
    def samples(self) -> int:
        return len(self._ys)


class SpeedModels:
    """The node's first-token models: one for the edge, one per cloud member."""

    def __init__(self) -> None:
        self.edge = FirstTokenModel()
        self._members: dict[str, FirstTokenModel] = {}

    def member(self, name: str) -> FirstTokenModel:
        model = self._members.get(name)
        if model is None:
            model = self._members.setdefault(name, FirstTokenModel())
        return model

    @staticmethod
    def edge_state(prompt_tokens: int, running: int, wait_s: float | None) -> tuple[float, ...]:
        return (float(prompt_tokens), float(running), float(wait_s or 0.0))

    @staticmethod
    def member_state(prompt_tokens: int, depth: int) -> tuple[float, ...]:
        return (float(prompt_tokens), float(depth))

    def cloud(self, prompt_tokens: int, depths: Iterable[tuple[str, int]]) -> float | None:
        """The soonest healthy member (the pool picks the least deep); None if any is unknown:
        the pool may pick a member this node has never timed."""
        best: float | None = None
        for name, depth in depths:
            p = self.member(name).predict(self.member_state(prompt_tokens, depth))
            if p is None:
                return None
            best = p if best is None else min(best, p)
        return best
