"""A generated token's log probability and its most likely alternatives, from one row of logits
(both engines report them the same way)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .generation import TokenLogprob


def token_logprob(logits: np.ndarray, token: int, top: int, piece: Callable[[int], bytes]) -> TokenLogprob:
    """``token``'s log probability under the model's distribution at this step (its raw logits,
    before any sampling setting or grammar), with the ``top`` most likely tokens; ``piece`` gives
    a token's bytes."""
    shifted = logits.astype(np.float32, copy=False) - logits.max()
    norm = float(np.log(np.exp(shifted).sum()))

    def entry(t: int, alternatives: tuple[TokenLogprob, ...] = ()) -> TokenLogprob:
        raw = piece(t)
        return TokenLogprob(raw.decode("utf-8", errors="replace"), float(shifted[t]) - norm, raw, alternatives)

    best: list[int] = []
    if top > 0:
        picked = np.argpartition(-shifted, top - 1)[:top]
        best = [int(t) for t in picked[np.argsort(-shifted[picked], kind="stable")]]
    return entry(token, tuple(entry(t) for t in best))
