"""Adversarial pairs for ``bench.cache``: edits of held-out questions that a cache must refuse.

Generated with templates and a seed that the verifier's training (``edge/cache/rewrites.py``,
seed 0) does not use (docs/cache.md lists them). Every pair in CATEGORIES must be refused;
"paraphrase" pairs (wording only) may be served.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Its figures are blind: no rule was fixed against this seed (20261123, the one before, was).
SEED = 20261125
CATEGORIES = ("negation", "number", "entity", "order", "scope")

_NUM_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "ten", "twelve", "twenty")
_WORD_NUM = re.compile(r"\b(" + "|".join(_NUM_WORDS) + r")\b", re.IGNORECASE)
_DIGITS = re.compile(r"\b\d+\b")
_NAMES = (
    "Brazil", "Japan", "Nigeria", "Sweden", "Toronto", "Berlin", "Samsung", "Microsoft", "Tesla", "Harvard",
    "Kotlin", "Rust", "Shakespeare", "Einstein", "Bollywood", "Netflix", "Amazon", "Mumbai", "Chennai", "Kerala",
)
_CAPITAL = re.compile(r"(?<=[a-z,] )([A-Z][a-zA-Z]{2,})")
_CONTRACT = (
    (r"\bcan\b", "can't"), (r"\bdoes\b", "doesn't"), (r"\bdo\b", "don't"), (r"\bis\b", "isn't"),
    (r"\bare\b", "aren't"), (r"\bshould\b", "shouldn't"), (r"\bwill\b", "won't"), (r"\bdid\b", "didn't"),
)
_THAN = re.compile(r"\b(\w+) (better|worse|bigger|smaller|faster|slower|stronger|more \w+) than (\w+)\b")
# Directional only: "X vs Y" asks the same as "Y vs X" and is left out.
_INTO = re.compile(r"\b([A-Z]\w*) (into|over) ([A-Z]\w*)\b")
_NOT_A_THING = frozenset("much far way lot is are be it this that any even".split())
_CONDITIONS = (
    " during pregnancy", " for a 10 year old", " in Canada", " in winter", " with a Mac", " on a budget",
    " after 40", " in Hindi", " for a small business", " without internet", " in the UK", " for seniors",
)
_LEADING_CONDITION = re.compile(r"^(.{12,}?)\s+(?:in|for|on|with|during|under|at) [\w .'-]{2,30}(\?*)$")


@dataclass(frozen=True, slots=True)
class AdversarialPair:
    stored: str
    query: str
    category: str  # one of CATEGORIES (must refuse) or "paraphrase" (may serve)


def _negation(q: str, rng: random.Random) -> str | None:
    if re.search(r"\bnever\b|n't\b", q):
        return None
    for pattern, neg in rng.sample(_CONTRACT, len(_CONTRACT)):
        m = re.search(pattern, q)
        if m is not None:
            return q[: m.start()] + neg + q[m.end() :]
    m = re.search(r"\b(I|you|we|they|people) (\w+)", q)
    if m is None:
        return None
    return q[: m.start(2)] + "never " + q[m.start(2) :]


def _number(q: str, rng: random.Random) -> str | None:
    m = _WORD_NUM.search(q)
    if m is not None:
        other = rng.choice([w for w in _NUM_WORDS if w != m.group(1).lower()])
        return q[: m.start()] + other + q[m.end() :]
    m = _DIGITS.search(q)
    if m is None:
        return None
    n = int(m.group())
    new = n * 10 if n < 1000 else n - rng.choice((5, 10))
    return q[: m.start()] + str(new) + q[m.end() :]


def _entity(q: str, rng: random.Random) -> str | None:
    found = [m for m in _CAPITAL.finditer(q) if m.group(1) not in _NAMES]
    if not found:
        return None
    m = rng.choice(found)
    return q[: m.start(1)] + rng.choice(_NAMES) + q[m.end(1) :]


def _order(q: str, rng: random.Random) -> str | None:
    m = _THAN.search(q)
    link = "{} than" if m is not None else "{}"
    m = m or _INTO.search(q)
    if m is None or m.group(1).lower() == m.group(3).lower() or m.group(1).lower() in _NOT_A_THING:
        return None
    return q[: m.start()] + f"{m.group(3)} {link.format(m.group(2))} {m.group(1)}" + q[m.end() :]


def _scope(q: str, rng: random.Random) -> str | None:
    m = _LEADING_CONDITION.match(q)
    if m is not None and rng.random() < 0.4:
        return m.group(1) + (m.group(2) or "?")
    body = q.rstrip(" ?")
    return None if len(body) < 12 else body + rng.choice(_CONDITIONS) + "?"


def _paraphrase(q: str, rng: random.Random) -> str:
    """Wording only: case, punctuation, filler and politeness that training did not use."""
    ops: list[Callable[[str], str]] = [
        lambda s: s.upper() if len(s) < 60 else s.lower(),
        lambda s: "Hey, " + s[:1].lower() + s[1:],
        lambda s: s.rstrip("?") + "? Any ideas?",
        lambda s: "Could you please answer: " + s,
        lambda s: s.replace("?", " ?"),
        lambda s: s.rstrip("?") + ".",
    ]
    return rng.choice(ops)(q)


def generate(questions: Sequence[str], per_category: int = 80, paraphrases: int = 100,
             seed: int = SEED) -> list[AdversarialPair]:
    """``per_category`` must-refuse pairs for each of CATEGORIES plus ``paraphrases`` safe rewordings."""
    rng = random.Random(seed)
    makers: dict[str, Callable[[str, random.Random], str | None]] = {
        "negation": _negation, "number": _number, "entity": _entity, "order": _order, "scope": _scope,
    }
    pool = [q for q in dict.fromkeys(questions) if 15 <= len(q) <= 150]
    out: list[AdversarialPair] = []
    for cat in CATEGORIES:
        rng.shuffle(pool)
        made = 0
        for q in pool:
            if made == per_category:
                break
            edited = makers[cat](q, rng)
            if edited is None or edited.strip().lower() == q.strip().lower():
                continue
            out.append(AdversarialPair(stored=q, query=edited, category=cat))
            made += 1
    rng.shuffle(pool)
    out += [AdversarialPair(q, _paraphrase(q, rng), "paraphrase") for q in pool[:paraphrases]]
    return out
