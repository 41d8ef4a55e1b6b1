"""How soon each side would start and end this request's answer, learnt from the node's own answers.

Each side (the edge, every cloud member) has two small least-squares models on its live state,
refitted from its recent streamed answers: the time from the routing decision to the first token
(the caller adds the time the request has already spent), and the time per further token. The state:

- the edge: the prompt's tokens, the requests decoding, the edge's own estimate of the wait
  for a slot (:meth:`edge.LlamaEngine.prepare`), and the requests in flight on the cloud (a member
  on the same box takes the edge's cores);
- a member: the prompt's tokens, the member's depth (this node's requests in flight plus the
  others vLLM's ``/metrics`` reports), and the requests decoding on the edge (the same, the other
  way round; a fit finds no effect where the member has cores of its own); the round trip in the
  intercept.

A side with too few answers yet has no prediction (None): the policy then decides as if it were
fast, so an idle node routes as it always did.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

# Enough answers to fit the few coefficients; a window short enough to follow a change of load.
MIN_SAMPLES = 12
WINDOW = 200
_RIDGE = 1e-3  # keeps a fit with a constant feature (no load seen yet) well posed


class TimeModel:
    """Seconds (to the first token, or per token) as a linear function of a side's state, fitted online."""

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


@dataclass(frozen=True, slots=True)
class Prediction:
    """Seconds from the decision to a side's first token and to the end of ``tokens`` tokens."""

    first_s: float
    done_s: float


class SideModel:
    """One side's two fits on the same state: to the first token, and per token after it."""

    def __init__(self) -> None:
        self.first = TimeModel()
        self.per_token = TimeModel()

    def observe(self, x: Sequence[float], first_s: float, end_s: float, tokens: int) -> None:
        """One streamed answer: its first token ``first_s`` after the decision, its end ``end_s``."""
        self.first.observe(x, first_s)
        if tokens > 1:  # a one-token answer has no pace
            self.per_token.observe(x, max(0.0, end_s - first_s) / (tokens - 1))

    def predict(self, x: Sequence[float], tokens: int) -> Prediction | None:
        """None until both fits have enough answers."""
        first, per_token = self.first.predict(x), self.per_token.predict(x)
        if first is None or per_token is None:
            return None
        return Prediction(first, first + per_token * max(0, tokens - 1))


class SpeedModels:
    """The node's speed models: one for the edge, one per cloud member."""

    def __init__(self) -> None:
        self.edge = SideModel()
        self._members: dict[str, SideModel] = {}

    def member(self, name: str) -> SideModel:
        model = self._members.get(name)
        if model is None:
            model = self._members.setdefault(name, SideModel())
        return model

    @staticmethod
    def edge_state(prompt_tokens: int, running: int, wait_s: float | None, cloud_depth: int) -> tuple[float, ...]:
        return (float(prompt_tokens), float(running), float(wait_s or 0.0), float(cloud_depth))

    @staticmethod
    def member_state(prompt_tokens: int, depth: int, edge_running: int) -> tuple[float, ...]:
        return (float(prompt_tokens), float(depth), float(edge_running))

    def cloud(
        self, prompt_tokens: int, depths: Iterable[tuple[str, int]], edge_running: int, tokens: int
    ) -> Prediction | None:
        """The soonest first token and the soonest end among the healthy members (the pool picks
        the least deep); None if any is unknown: the pool may pick a member this node has never timed."""
        best: Prediction | None = None
        for name, depth in depths:
            p = self.member(name).predict(self.member_state(prompt_tokens, depth, edge_running), tokens)
            if p is None:
                return None
            best = p if best is None else Prediction(min(best.first_s, p.first_s), min(best.done_s, p.done_s))
        return best
