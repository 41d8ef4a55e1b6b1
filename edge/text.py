"""Turning a token stream into text: whole UTF-8 characters only, and stop sequences cut cleanly."""

from __future__ import annotations

import codecs
from typing import Any


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


class StopMatcher:
    """Hold back text that could be the start of a stop sequence; cut at the first full match."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit = False

    def feed(self, text: str) -> tuple[str, bool]:
        """Return (text safe to emit, whether a stop sequence was reached)."""
        if not self._stops:
            return text, False
        buf = self._held + text
        cut = min((i for i in (buf.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self._held = ""
            self.hit = True
            return buf[:cut], True
        keep = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), 0, -1):
                if buf.endswith(stop[:n]):
                    keep = max(keep, n)
                    break
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self, text: str = "") -> str:
        """Everything still held, at the end of the stream (no stop sequence completed)."""
        out, _ = self.feed(text) if text else ("", False)
        rest, self._held = self._held, ""
        return out + rest
