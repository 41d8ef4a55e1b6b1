"""The model on one rank: loading (optionally sharded with ``tp_plan="auto"``), prefill, decode, sampling."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence as Sequence_
from pathlib import Path
from typing import Any

from models import REPEAT_WINDOW

from ..errors import WeightsError


def pick_device(choice: str) -> Any:
    """The torch device of this rank (``LOCAL_RANK`` picks the GPU under tensor parallelism)."""
    import torch

    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise WeightsError("--device cuda was asked for but CUDA is not available", param="device")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def load_model(weights: Path, device: Any, *, tensor_parallel: bool, dtype: str = "float32") -> tuple[Any, Any]:
    """The model (sharded across the process group when ``tensor_parallel``) and its tokenizer.

    ``dtype`` other than the file's makes transformers cast each tensor as it loads it: the
    float32 file stays memory-mapped only while loading, so the process keeps one copy, in ``dtype``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    try:
        tokenizer = AutoTokenizer.from_pretrained(weights)
        if tensor_parallel:
            # transformers builds the device mesh on the process group we initialised (gloo on CPU).
            model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch_dtype, tp_plan="auto")
        else:
            model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch_dtype).to(device)
    except (OSError, ValueError, RuntimeError) as exc:
        raise WeightsError(f"could not load {weights}: {exc}") from exc
    model.eval()
    return model, tokenizer


class Sequence:
    """One generation's KV cache on this rank; every rank runs the same calls in the same order."""

    def __init__(self, model: Any) -> None:
        from transformers import DynamicCache

        self._model = model
        self._cache = DynamicCache()
        self._device = model.device

    def _forward(self, ids: list[int]) -> Any:
        import torch

        x = torch.tensor([ids], dtype=torch.long, device=self._device)
        out = self._model(input_ids=x, past_key_values=self._cache, use_cache=True, logits_to_keep=1)
        return out.logits[0, -1]

    def prefill(self, ids: list[int]) -> Any:
        """Logits of the token after the prompt."""
        return self._forward(ids)

    def advance(self, token: int) -> Any:
        """Logits of the token after ``token``."""
        return self._forward([token])


def choose_token(
    logits: Any, temperature: float, top_p: float, generator: Any, top_k: int | None = None, min_p: float | None = None
) -> int:
    """Greedy at temperature 0, else sampling from a seeded generator among the ``top_k`` most
    likely tokens (0 or less, or None: all), the nucleus ``top_p``, and those at least ``min_p``
    times as likely as the best."""
    import torch

    if temperature <= 0.0:
        return int(torch.argmax(logits))
    scaled = logits.float().cpu() / temperature
    if top_k is not None and 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if min_p:
        probs = probs.masked_fill(probs < min_p * probs.max(), 0.0)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        beyond = torch.cumsum(sorted_probs, dim=-1) - sorted_probs > top_p
        sorted_probs[beyond] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))


class Repeat:
    """llama.cpp's repeat penalty: a token among the last ``REPEAT_WINDOW`` (the prompt's tail
    first) has its logit divided by ``penalty`` when positive, multiplied when negative."""

    def __init__(self, penalty: float, prompt: Sequence_[int]) -> None:
        self._penalty = penalty
        self._recent: deque[int] = deque(prompt[-REPEAT_WINDOW:], maxlen=REPEAT_WINDOW)

    def apply(self, logits: Any) -> Any:
        import torch

        out = logits.float().clone()
        ids = torch.tensor(sorted({t for t in self._recent if 0 <= t < out.shape[-1]}), dtype=torch.long)
        if len(ids):
            picked = out[ids]
            out[ids] = torch.where(picked > 0, picked / self._penalty, picked * self._penalty)
        return out

    def count(self, token: int) -> None:
        self._recent.append(token)


class Penalties:
    """OpenAI's frequency and presence penalties, from the counts of the tokens generated so far."""

    def __init__(self, frequency: float, presence: float, seen: Sequence_[int], n_vocab: int) -> None:
        import torch

        self._frequency = frequency
        self._presence = presence
        self._counts = torch.zeros(n_vocab, dtype=torch.float32)
        for token in seen:  # a continuation's answer so far counts as generated
            self.count(token)

    def apply(self, logits: Any) -> Any:
        """The logits lowered by ``frequency`` per earlier use of each token, ``presence`` once."""
        counts = self._counts
        n = min(logits.shape[-1], counts.shape[0])
        out = logits.float().clone()
        out[:n] -= counts[:n] * self._frequency + (counts[:n] > 0).float() * self._presence
        return out

    def count(self, token: int) -> None:
        if 0 <= token < self._counts.shape[0]:
            self._counts[token] += 1.0


def add_bias(logits: Any, bias: Sequence_[tuple[int, float]]) -> Any:
    """OpenAI's ``logit_bias`` on a copy of the logits: each listed token's logit plus its bias."""
    import torch

    out = logits.float().clone()
    ids = torch.tensor([t for t, _ in bias if t < out.shape[-1]], dtype=torch.long)
    out[ids] += torch.tensor([b for t, b in bias if t < out.shape[-1]], dtype=torch.float32)
    return out
