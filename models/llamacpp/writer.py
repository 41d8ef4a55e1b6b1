"""llama.cpp's server's ``/completion`` answers: one JSON object, or server-sent events whose
``data`` carries a piece of ``content`` with ``stop: false``, then the whole record with
``stop: true`` (no ``[DONE]``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..generation import TokenLogprob, Usage, Writer
from ..openai.logprobs import token_entries
from ..openai.stream import sse


class LlamaCppWriter(Writer):
    """One ``/completion`` answer."""

    def __init__(self, model: str, prompt: str, settings: dict[str, Any], *, probs: bool = False) -> None:
        self.model = model
        self.prompt = prompt
        self.settings = settings
        self.probs = probs
        self._started = time.perf_counter()
        self._first: float | None = None
        self._predicted = 0  # pieces sent (a token each, or several held back by a stop string)
        self._text: list[str] = []

    def _final(
        self, content: str, finish_reason: str, usage: Usage, entries: Sequence[TokenLogprob] | None,
        stop_word: str | None,
    ) -> dict[str, Any]:
        now = time.perf_counter()
        first = self._first if self._first is not None else self._started
        prompt_ms, predicted_ms = (first - self._started) * 1000, (now - first) * 1000
        body: dict[str, Any] = {
            "index": 0, "content": content, "tokens": [], "id_slot": -1, "stop": True, "model": self.model,
            "tokens_predicted": usage.completion_tokens, "tokens_evaluated": usage.prompt_tokens,
            "generation_settings": self.settings, "prompt": self.prompt,
            "has_new_line": "\n" in "".join(self._text) + content, "truncated": False,
            "stop_type": _stop_type(finish_reason, stop_word), "stopping_word": stop_word or "", "tokens_cached": 0,
            "timings": {
                "prompt_n": usage.prompt_tokens, "prompt_ms": prompt_ms,
                "prompt_per_second": usage.prompt_tokens / (prompt_ms / 1000) if prompt_ms > 0 else None,
                "predicted_n": usage.completion_tokens, "predicted_ms": predicted_ms,
                "predicted_per_second": usage.completion_tokens / (predicted_ms / 1000) if predicted_ms > 0 else None,
            },
        }
        # llama.cpp's entries carry the token id too; the engines' log probabilities do not keep it.
        if self.probs and entries is not None:  # a stream sent its tokens' with each piece
            body["completion_probabilities"] = token_entries(entries)
        return body

    def text(self, text: str, logprobs: Sequence[TokenLogprob] = (), index: int = 0) -> bytes:
        if self._first is None:
            self._first = time.perf_counter()
        self._predicted += 1
        self._text.append(text)
        body: dict[str, Any] = {"index": 0, "content": text, "tokens": [], "stop": False, "id_slot": -1, "tokens_predicted": self._predicted}
        if self.probs:
            body["completion_probabilities"] = token_entries(logprobs)
        return sse(body)

    def finish(
        self, finish_reason: str, usage: Usage, index: int = 0, last: bool = True, stop_word: str | None = None
    ) -> bytes:
        return sse(self._final("", finish_reason, usage, None, stop_word))

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        return sse({"error": {"code": 500, "message": message, "type": err_type}})

    def whole(
        self, text: str, finish_reason: str, usage: Usage, logprobs: Sequence[TokenLogprob] = (),
        stop_word: str | None = None,
    ) -> dict[str, Any]:
        return self._final(text, finish_reason, usage, logprobs, stop_word)


def _stop_type(finish_reason: str, stop_word: str | None) -> str:
    """llama.cpp's ``stop_type``: "word" for a stop sequence, "limit" for a length cut, else "eos"."""
    if finish_reason == "length":
        return "limit"
    return "word" if stop_word is not None and finish_reason == "stop" else "eos"
