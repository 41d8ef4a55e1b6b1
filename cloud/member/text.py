"""Generated token ids to text deltas: whole characters only, stop sequences cut cleanly."""

from __future__ import annotations

from typing import Any


class DeltaDecoder:
    """Incremental detokenization with a sliding window (as text-generation servers do).

    Decoding only the last few tokens keeps each step O(1); a delta ending in U+FFFD is an
    incomplete UTF-8 character and is held back until the next token completes it.
    """

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer
        self._ids: list[int] = []
        self._prefix = 0
        self._read = 0

    def _decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))

    def feed(self, token: int) -> str:
        self._ids.append(token)
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self._ids)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        """Whatever is still held at the end (an incomplete character is emitted as U+FFFD)."""
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        self._prefix = self._read = len(self._ids)
        return after[len(before) :]


class StopCutter:
    """Hold back text that may begin a stop sequence; cut at the first complete one."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """Text safe to emit now; sets ``hit`` when a stop sequence completed."""
        if not self._stops or self.hit:
            return "" if self.hit else text
        buf = self._held + text
        found = [i for i in (buf.find(s) for s in self._stops) if i >= 0]
        if found:
            self._held, self.hit = "", True
            return buf[: min(found)]
        keep = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), keep, -1):
                if buf.endswith(stop[:n]):
                    keep = n
                    break
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep]

    def flush(self) -> str:
        held, self._held = self._held, ""
        return "" if self.hit else held
