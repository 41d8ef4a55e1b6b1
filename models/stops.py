"""Stop sequences over streamed text: hold back what may begin one, cut at the first complete one.

The edge's llama.cpp engine detokenizes itself: text arrives in arbitrary pieces, so a stop
sequence may straddle two of them.
"""

from __future__ import annotations


class StopMatcher:
    """Hold back text that could be the start of a stop sequence; cut at the first full match."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit = False
        self.matched: str | None = None  # the stop sequence that ended the text (llama.cpp's stopping_word)

    def feed(self, text: str) -> tuple[str, bool]:
        """Return (text safe to emit, whether a stop sequence was reached); nothing after a hit."""
        if self.hit:
            return "", True
        if not self._stops:
            return text, False
        buf = self._held + text
        found = [(i, n, s) for n, s in enumerate(self._stops) if (i := buf.find(s)) >= 0]
        if found:
            cut, _, self.matched = min(found)  # the earliest in the text; at a tie, the first listed
            self._held = ""
            self.hit = True
            return buf[:cut], True
        keep = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), keep, -1):
                if buf.endswith(stop[:n]):
                    keep = n
                    break
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self, text: str = "") -> str:
        """Everything still held, at the end of the stream (nothing once a stop sequence completed)."""
        out, _ = self.feed(text) if text else ("", self.hit)
        rest, self._held = self._held, ""
        return out + rest
