"""The entity guard: does one question name something (a person, place, product) the other does not?

Entities are capitalized words that are not sentence openers, question words or common words
(``lexicon.COMMON``); what counts as the same name (acronyms, demonyms, a dropped part, currencies,
topic prefixes) is docs/cache.md's entity rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|\d+(?:[.,]\d+)*|[₹$€£]")
_DOTTED = re.compile(r"\b(?:[A-Za-z]\.){2,}")  # U.K. / M.S. / U.S.A. -> UK / MS / USA
_TOPIC = re.compile(r"^\s*([^:?.!]{2,40}):\s+(?=\S)")
_JOINERS = frozenset("of the".split())  # inside a name: "United States of America"
_CURRENCY = {
    **dict.fromkeys("rs inr rupee rupees ₹".split(), "inr"),
    **dict.fromkeys("usd dollar dollars $".split(), "usd"),
    **dict.fromkeys("eur euro euros €".split(), "eur"),
    **dict.fromkeys("gbp £".split(), "gbp"),  # not "pounds": a weight as often as a currency
}
_CURRENCY_CODES = frozenset("rs inr usd eur gbp".split())  # written as names, but not names


@dataclass(frozen=True, slots=True)
class Names:
    words: frozenset[str]  # every word, stemmed
    runs: tuple[tuple[str, ...], ...]  # capitalized runs ("Agoura Hills"), stemmed, common words kept
    entities: tuple[tuple[str, ...], ...]  # per run: its words that are names
    acronyms: tuple[str, ...]  # per run: its initials ("" for a one-word run)
    currencies: frozenset[str]


def stem(word: str) -> str:
    """Possessive and plural 's' removed: France's ~ France, Muslims ~ Muslim, TVs ~ TV."""
    word = word.removesuffix("'s")
    return word[:-1] if len(word) > 2 and word.endswith("s") and not word.endswith("ss") else word


@lru_cache(maxsize=4096)
def names(text: str, common: frozenset[str]) -> Names:
    text = _DOTTED.sub(lambda m: m.group().replace(".", ""), text)
    topic = _TOPIC.match(text)
    body_start = topic.end() if topic is not None and len(text) - topic.end() >= 10 else 0
    tokens = list(_TOKEN.finditer(text))
    words = {stem(m.group().lower()) for m in tokens}
    currencies = {_CURRENCY[m.group().lower()] for m in tokens if m.group().lower() in _CURRENCY}
    runs: list[list[str]] = []
    current: list[str] = []
    for i, m in enumerate(tokens):
        tok = m.group()
        # A run is broken by punctuation ("Quora, Reddit"): only spaces may sit between its words.
        joined = i > 0 and text[tokens[i - 1].end() : m.start()].strip() == ""
        nxt = tokens[i + 1].group() if i + 1 < len(tokens) else ""
        if current and not joined:
            runs.append(current)
            current = []
        if tok[0].isupper():
            current.append(tok)
        elif current and tok.lower() in _JOINERS and nxt[:1].isupper():
            current.append(tok.lower())
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    raw: list[tuple[str, ...]] = []
    ents: list[tuple[str, ...]] = []
    for run in runs:
        start = text.find(run[0])
        lowered = [t.lower().removesuffix("'s") for t in run]
        raw.append(tuple(stem(t) for t in lowered if t not in _JOINERS))
        ents.append(tuple(
            t for t in lowered
            if start >= body_start and t not in common and t not in _CURRENCY_CODES and t not in _JOINERS and len(t) >= 2
        ))
    acronyms = tuple("".join(t[0].lower() for t in run if t[0].isupper()) if sum(t[0].isupper() for t in run) > 1 else ""
                     for run in runs)
    return Names(frozenset(words), tuple(raw), tuple(ents), acronyms, frozenset(currencies))


def _present(entity: str, acronym: str, other: Names) -> bool:
    s = stem(entity)
    # "United Kingdom" ~ "UK" written out, and "UK" ~ a run "United Kingdom" (not acronym ~ acronym:
    # "Southeast Asia" and "South Asia" share the letters "SA").
    if s in other.words or (acronym and acronym in other.words) or entity in other.acronyms:
        return True
    # Demonyms: India ~ Indian, America ~ American, Korea ~ Korean, Europe ~ European.
    near = {s + "n", s + "an"} | ({s[:-1]} if s.endswith("n") else set()) | ({s[:-2]} if s.endswith("an") else set())
    return any(len(w) >= 4 and w in other.words for w in near)


def _missing(a: Names, b: Names) -> list[tuple[str, tuple[str, ...]]]:
    """Entities of ``a`` absent from ``b``, each with its capitalized run."""
    return [
        (e, run)
        for run, ents, acr in zip(a.runs, a.entities, a.acronyms, strict=True)
        for e in ents if not _present(e, acr, b)
    ]


def differ(query: str, candidate: str, common: frozenset[str]) -> bool:
    """True when the two questions do not name the same things."""
    a, b = names(query, common), names(candidate, common)
    if a.currencies and b.currencies and a.currencies.isdisjoint(b.currencies):
        return True
    miss_a, miss_b = _missing(a, b), _missing(b, a)
    if miss_a and miss_b:
        return True
    # One side drops part of a name the other keeps ("Donald Trump" / "Trump"): fine when the other
    # side writes the rest of that name as a capitalized run of its own, and nothing more in it
    # ("Southeast Asia" / "South Asia" differ).
    one_sided = miss_a or miss_b
    other = b if miss_a else a
    return any(
        not any(r and set(r) < set(run) and stem(e) not in r for r in other.runs) for e, run in one_sided
    )
