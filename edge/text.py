"""Turning a llama.cpp token stream into text: whole UTF-8 characters only (stop sequences: :mod:`models.stops`)."""

from __future__ import annotations

import codecs
from typing import Any

from models.stops import StopMatcher

__all__ = ["IncrementalDecoder", "StopMatcher"]


class IncrementalDecoder:
    """Detokenize one token at a time; a character split across tokens is held until complete.

    ``vocab.piece(token)`` gives one token's bytes (the edge's :class:`Vocab` remembers them).
    """

    def __init__(self, vocab: Any) -> None:
        self._piece = vocab.piece
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int) -> str:
        return self._utf8.decode(self._piece(token))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)
