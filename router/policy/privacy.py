"""Private-request detection: an explicit flag, or a configured regex matching the prompt."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .config import PrivateRule, RoutingSettings

FLAG = "flag"


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum used by payment card numbers (``digits``: only 0-9)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


@dataclass(frozen=True, slots=True)
class _Compiled:
    name: str
    regex: re.Pattern[str]
    luhn: bool

    def matches(self, text: str) -> bool:
        # Searched a window at a time, handing the GIL over between windows: ``re`` holds it for a
        # whole search, and a waiting thread gets it back only after a 5 ms switch interval, so
        # one search of a prompt of 2,000 messages (800,000 characters) on a worker thread held
        # the event loop ~100-200 ms. Windows overlap by _OVERLAP: any match that long or
        # shorter lies whole in one of them.
        for start in range(0, len(text) or 1, _WINDOW):
            if start:
                time.sleep(0)  # releases the GIL: the event loop runs now if it waits for it
            end = min(len(text), start + _WINDOW + _OVERLAP)
            for m in self.regex.finditer(text, start, end):
                if m.end() == end < len(text):
                    break  # cut by the window: the next one sees it whole
                if not self.luhn:
                    return True
                digits = re.sub(r"\D", "", m.group(0))
                if 13 <= len(digits) <= 19 and luhn_valid(digits):
                    return True
        return False


_WINDOW = 16_384
_OVERLAP = 1_024


class PrivacyDetector:
    """Says whether a request must stay on the box, and which rule said so."""

    def __init__(self, rules: Sequence[PrivateRule], *, enabled: bool = True) -> None:
        self._rules = (
            tuple(_Compiled(r.name, re.compile(r.pattern), r.luhn) for r in rules) if enabled else ()
        )

    @classmethod
    def from_settings(cls, settings: RoutingSettings) -> PrivacyDetector:
        return cls(settings.private_rules, enabled=settings.private_detection)

    def detect(self, text: str, *, flag: bool = False) -> str | None:
        """``"flag"`` when the request was marked private, else the first matching rule's name, else None."""
        if flag:
            return FLAG
        return next((rule.name for rule in self._rules if rule.matches(text)), None)
