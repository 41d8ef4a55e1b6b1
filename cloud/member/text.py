"""Generated token ids to text deltas: whole characters only (stop sequences: :mod:`models.stops`)."""

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
