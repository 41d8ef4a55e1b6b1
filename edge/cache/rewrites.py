"""Generated training pairs for the verifier: hard negatives and safe rewordings of real questions.

A cache must refuse a near-duplicate that changes a specific (number, entity, negation, direction,
scope) and may serve one that only changes wording, case, punctuation or politeness. QQP's labels
say little about either, so the verifier also learns from edits of train questions made here.

These are the *training* templates. The adversarial benchmark (``bench/cache_adversarial.py``)
uses different templates and another seed, so it measures generalisation, not memorisation.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CATEGORIES = ("number", "entity", "negation", "order", "scope")

_AUX = re.compile(r"\b(is|are|was|were|can|could|should|would|will|do|does|did|has|have)\b", re.IGNORECASE)
_NEGATED = re.compile(r"\b(is|are|was|were|can|could|should|would|will|do|does|did|has|have) not\b")
_DIGITS = re.compile(r"\b\d+\b")
_ENTITY = re.compile(r"(?<=[a-z,] )([A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)?)")
_FROM_TO = re.compile(r"\bfrom ([\w.+#-]+(?: [A-Z][\w-]+)?) to ([\w.+#-]+(?: [A-Z][\w-]+)?)")
_X_TO_Y = re.compile(r"\b([A-Z][\w.+#-]*) to ([A-Z][\w.+#-]*)\b")
# More direction templates (none of them the benchmark's "X than Y" / "X into Y"): "the A of B",
# "A before/after B", and subject-verb-object with the verb kept ("do cats hate dogs").
_OF = re.compile(r"\bthe ([a-z]{3,}) of (?:the |a |an )?([a-z]{3,})\b", re.IGNORECASE)
_BEFORE_AFTER = re.compile(r"\b([A-Za-z]{3,}) (before|after) ([A-Za-z]{3,})\b")
_SVO = re.compile(
    r"\b(?:do|does|did|can|will|would|why do|why does) ([A-Za-z]{3,}) "
    r"(hate|love|like|fear|eat|kill|beat|follow|attack|marry|trust|need|help|hurt|chase|defeat|support)s? "
    r"([A-Za-z]{3,})\b",
    re.IGNORECASE,
)
_NOT_NOUN = frozenset("the a an and or but you your they them their his her its our how what why which this that".split())
_TRAILING_SCOPE = re.compile(r"\s+(?:in|for|on|at|with|during|under|after|before) [\w .'-]{2,30}(?=\?*$)")
_NARROWERS = (
    " for beginners", " in India", " for a student", " in 2017", " on Android", " at home",
    " as a fresher", " in the USA", " without money", " for women", " in Python", " online",
)
_POLITE = ("Please tell me: ", "Can someone tell me ", "I want to know: ", "Quick question: ", "Hi, ")


@dataclass(frozen=True, slots=True)
class Rewrite:
    stored: str  # the question in the cache
    query: str  # the question asked
    servable: bool
    category: str  # one of CATEGORIES for a negative, "reword" for a safe rewording


def _number(q: str, rng: random.Random) -> str | None:
    found = list(_DIGITS.finditer(q))
    if not found:
        return None
    m = rng.choice(found)
    n = int(m.group())
    new = n + rng.choice((1, 2, 3, 5, 10)) if n < 1900 or n > 2100 else n + rng.choice((-3, -2, -1, 1, 2))
    return q[: m.start()] + str(new) + q[m.end() :]


def _entity(q: str, rng: random.Random, pool: Sequence[str]) -> str | None:
    found = [m for m in _ENTITY.finditer(q) if m.group(1) not in ("I", "What", "How", "Why")]
    if not found or not pool:
        return None
    m = rng.choice(found)
    other = rng.choice(pool)
    if other.lower() == m.group(1).lower():
        return None
    return q[: m.start(1)] + other + q[m.end(1) :]


def _negation(q: str) -> str | None:
    neg = _NEGATED.search(q)
    if neg is not None:  # remove an existing "not": the stored question is the negated one
        return q[: neg.start()] + neg.group(1) + q[neg.end() :]
    m = _AUX.search(q)
    if m is None:
        return None
    return q[: m.end()] + " not" + q[m.end() :]


def _order(q: str, rng: random.Random) -> str | None:
    found = [m for rx in (_FROM_TO, _X_TO_Y, _OF, _BEFORE_AFTER, _SVO) if (m := rx.search(q)) is not None]
    if not found:
        return None
    m = rng.choice(found)
    first, last = 1, m.lastindex or 2
    a, b = m.group(first), m.group(last)
    if a.lower() == b.lower() or a.lower() in _NOT_NOUN or b.lower() in _NOT_NOUN:
        return None
    return q[: m.start(first)] + b + q[m.end(first) : m.start(last)] + a + q[m.end(last) :]


def _scope(q: str, rng: random.Random) -> str | None:
    trailing = _TRAILING_SCOPE.search(q)
    if trailing is not None and rng.random() < 0.5:  # broader: drop the condition
        return q[: trailing.start()] + q[trailing.end() :]
    body = q.rstrip("?").rstrip()
    if len(body) < 10:
        return None
    return body + rng.choice(_NARROWERS) + "?"


def _reword(q: str, rng: random.Random) -> str:
    """An edit that keeps every specific: case, punctuation, politeness, contractions."""
    ops: list[Callable[[str], str]] = [
        str.lower,
        lambda s: s.rstrip("?").rstrip(),
        lambda s: s.rstrip("?") + "??",
        lambda s: rng.choice(_POLITE) + s[:1].lower() + s[1:],
        lambda s: s.replace("What is", "What's").replace("How do I", "How can I"),
        lambda s: s.replace("What's", "What is").replace("How can I", "How do I"),
        lambda s: s + " Thanks!",
        lambda s: re.sub(r"\s+", "  ", s, count=1),
    ]
    out = q
    for op in rng.sample(ops, k=rng.choice((1, 2))):
        out = op(out)
    return out if out != q else q.lower() + " please"


def generate(questions: Sequence[str], n_negatives: int, n_positives: int, seed: int = 0) -> list[Rewrite]:
    """``n_negatives`` hard negatives spread over :data:`CATEGORIES` and ``n_positives`` rewordings.

    Each negative is one edit of a real question; which side is stored alternates, so the model
    sees both "narrower stored" and "broader stored". Deterministic for a given seed.
    """
    rng = random.Random(seed)
    # Capitalized names seen mid-sentence (so not just a first word), in order of appearance.
    pool = list(dict.fromkeys(m.group(1) for q in questions for m in _ENTITY.finditer(q)))
    makers: dict[str, Callable[[str], str | None]] = {
        "number": lambda q: _number(q, rng),
        "entity": lambda q: _entity(q, rng, pool),
        "negation": _negation,
        "order": lambda q: _order(q, rng),
        "scope": lambda q: _scope(q, rng),
    }
    out: list[Rewrite] = []
    order = list(questions)
    rng.shuffle(order)
    per_cat = max(1, n_negatives // len(CATEGORIES))
    for cat in CATEGORIES:
        made = 0
        for q in order:
            if made >= per_cat:
                break
            edited = makers[cat](q)
            if edited is None or edited.strip().lower() == q.strip().lower():
                continue
            stored, query = (q, edited) if rng.random() < 0.5 else (edited, q)
            out.append(Rewrite(stored, query, False, cat))
            made += 1
        rng.shuffle(order)
    for q in order[:n_positives]:
        out.append(Rewrite(q, _reword(q, rng), True, "reword"))
    return out
