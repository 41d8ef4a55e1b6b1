"""Turning a llama.cpp token stream into text: whole UTF-8 characters only (stop sequences: :mod:`models.stops`)."""

from __future__ import annotations

import codecs
from typing import Any

from models.stops import StopMatcher

__all__ = ["IncrementalDecoder", "StopMatcher"]  # StopMatcher lives in models (shared with the member)


class IncrementalDecoder:
    """Detokenize one token at a time; a character split across tokens is held until complete."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._prev: list[int] = []

    def feed(self, token: int) -> str:
        piece: bytes = self._llm.detokenize([token], prev_tokens=self._prev or None)
        self._prev.append(token)
        return self._utf8.decode(piece)

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)
