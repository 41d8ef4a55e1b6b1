"""Guards against false semantic hits: two prompts close in embedding space that ask different things.

Each guard names a reason (negation, polarity, number, entity, order: docs/cache.md) when the query
and a candidate differ in a way that changes the answer. A guard only refuses, never accepts: simple
lexical rules, written to leave paraphrases alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from . import entities
from .lexicon import (
    ADJECTIVE_ENDINGS, AXIS, COMMON, NEG_PREFIXES, NEGATORS, NOT_NEGATED, NUMBER_WORDS, ORDINAL, RELATION_WORDS,
    SYMMETRIC,
)

REASONS = ("negation", "polarity", "number", "entity", "order")

_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|\d+(?:[.,]\d+)*")


@dataclass(frozen=True, slots=True)
class TextSignals:
    """What the guards look at in one text (computed once per text)."""

    lower: tuple[str, ...]  # the tokens, lowercased
    negations: int
    polarity: dict[int, frozenset[int]]  # axis -> signs present
    numbers: Counter[float]
    entities: tuple[str, ...]  # lowercased, in order of appearance
    relations: frozenset[tuple[str, str, str]]  # (left, relation word, right), content words


@lru_cache(maxsize=4096)
def signals(text: str) -> TextSignals:
    tokens = tuple(_TOKEN.findall(text))
    lower = tuple(t.lower() for t in tokens)
    negations = sum(1 for t in lower if t in NEGATORS or t.endswith("n't"))
    polarity: dict[int, set[int]] = {}
    for i, t in enumerate(lower):
        word = t
        if t in ("on", "off") and i > 0 and lower[i - 1] in ("turn", "turning", "switch", "switching", "turned",
                                                               "switched", "power", "powered", "toggle"):
            word = "turn" + t
        elif t in ("on", "off"):
            continue  # a bare preposition "on" says nothing about polarity
        axis = AXIS.get(word)
        if axis is not None:
            polarity.setdefault(axis[0], set()).add(axis[1])
    numbers = Counter(v for v in map(_number, lower) if v is not None)
    names = (t.lower().removesuffix("'s") for t in tokens if t[0].isupper())
    entities = tuple(w for w in names if not (w in COMMON or w in AXIS or w in NUMBER_WORDS or len(w) < 2))
    content = [t for t in lower if t not in COMMON or t in RELATION_WORDS]
    relations: set[tuple[str, str, str]] = set()
    for j, t in enumerate(content):
        if t in RELATION_WORDS and 0 < j < len(content) - 1:
            left, right = content[j - 1], content[j + 1]
            if left not in RELATION_WORDS and right not in RELATION_WORDS:
                relations.add((left, t, right))
    return TextSignals(
        lower, negations, {k: frozenset(v) for k, v in polarity.items()}, numbers, entities, frozenset(relations)
    )


def _number(token: str) -> float | None:
    if token[0].isdigit():
        m = ORDINAL.match(token)
        raw = m.group(1) if m else token.replace(",", "")
        try:
            return float(raw)
        except ValueError:
            return None
    return float(NUMBER_WORDS[token]) if token in NUMBER_WORDS else None


def _joined_non(words: tuple[str, ...]) -> set[str]:
    """The words, "non" joined to the word after it ("non-profit" is "nonprofit")."""
    return set(re.sub(r"(?<!\S)non (?=\S)", "non", " ".join(words)).split())


def _negated_words(mine: tuple[str, ...], other: tuple[str, ...]) -> int:
    """Words of ``mine`` that are a word of ``other`` with a negating prefix ("unacceptable" against
    "acceptable"), when ``mine`` lacks the plain word: they count as negations."""
    own, theirs = _joined_non(mine), _joined_non(other)
    count = 0
    for word in own - theirs:
        if word in NOT_NEGATED or word in NEGATORS:
            continue
        for prefix in NEG_PREFIXES:
            base = word[len(prefix) :].lstrip("-")
            if not word.startswith(prefix) or len(base) < 4 or base not in theirs or base in own:
                continue
            if prefix[0] == "i" and not base.endswith(ADJECTIVE_ENDINGS):
                continue
            count += 1
            break
    return count


def _numbers_swapped(a: TextSignals, b: TextSignals) -> bool:
    """The same words with their numbers in another order ("what percent of 80 is 20" / "of 20 is
    80"); numbers joined symmetrically ("500 and 1000") have no order."""
    if a.lower == b.lower or sorted(a.lower) != sorted(b.lower):
        return False
    ga, gb = _grouped(list(a.lower)), _grouped(list(b.lower))
    return [w for w in ga if _number(w) is not None] != [w for w in gb if _number(w) is not None]


def check(query: str, candidate: str) -> str | None:
    """The first reason the candidate's answer cannot serve the query, or None."""
    a, b = signals(query), signals(candidate)
    negations_a = a.negations + _negated_words(a.lower, b.lower)
    negations_b = b.negations + _negated_words(b.lower, a.lower)
    if (negations_a % 2) != (negations_b % 2):
        return "negation"
    for axis in a.polarity.keys() & b.polarity.keys():
        if a.polarity[axis].isdisjoint(b.polarity[axis]):
            return "polarity"
    if a.numbers != b.numbers:
        return "number"
    if len(a.numbers) > 1 and _numbers_swapped(a, b):
        return "order"
    if entities.differ(query, candidate, COMMON | frozenset(AXIS) | frozenset(NUMBER_WORDS)):
        return "entity"
    if _reversed(a, b):
        return "order"
    return None


def _stem(word: str) -> str:
    """Possessive and plural 's' removed: France's ~ France, Muslims ~ Muslim."""
    word = word.removesuffix("'s")
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _reversed(a: TextSignals, b: TextSignals) -> bool:
    """True when both name the same two things in opposite roles."""
    for left, rel, right in a.relations:
        if (right, rel, left) in b.relations and (left, rel, right) not in b.relations:
            return True
    if _transposed(a, b) or _scrambled(a, b) or _swapped_around(a, b):
        return True
    shared = [e for e in dict.fromkeys(a.entities) if e in b.entities]
    if len(shared) < 2:
        return False
    ra, rb = {e: _role(a, e) for e in shared}, {e: _role(b, e) for e in shared}
    if all(ra[e] is not None and rb[e] is not None for e in shared):
        return any(ra[e] != rb[e] for e in shared)
    if shared == [e for e in dict.fromkeys(b.entities) if e in shared]:  # the same order
        return False
    # "Python and Java" vs "Java and Python": joined symmetrically, the order says nothing.
    return not (_joined_symmetrically(a, shared) and _joined_symmetrically(b, shared))


def _transposed(a: TextSignals, b: TextSignals) -> bool:
    """Same content words, exactly two of them swapped ("Muslims are terrorists" / "terrorists are Muslim")."""
    # Directional words count: "knowledge of English" / "English knowledge" are different bags
    # (a compound, not a swap); "percentage of Muslims ... terrorists" / "... of terrorists ... Muslim" are not.
    ca, cb = _sequence(a), _sequence(b)
    if sorted(ca) != sorted(cb) or ca == cb:
        return False
    diff = [i for i, (x, y) in enumerate(zip(ca, cb, strict=True)) if x != y]
    if len(diff) != 2 or ca[diff[0]] != cb[diff[1]] or ca[diff[1]] != cb[diff[0]]:
        return False
    swapped = {ca[diff[0]], ca[diff[1]]}
    return not (_joined_symmetrically(a, swapped) and _joined_symmetrically(b, swapped))


# Words that give the things around them a direction or a role: "A to B", "A of B", "A before B".
# "vs"/"versus" are left out: "Python vs Java" asks what "Java vs Python" asks.
_DIRECTIONAL = RELATION_WORDS | frozenset("of before after".split())


def _sequence(s: TextSignals) -> list[str]:
    return [_stem(w) for w in s.lower if (w not in COMMON or w in _DIRECTIONAL) and not w[0].isdigit()]


def _scrambled(a: TextSignals, b: TextSignals) -> bool:
    """The same content words with other neighbours around a directional word: "getting stronger than
    other currencies" / "other stronger than getting currencies" (a fronted phrase keeps them)."""
    sa, sb = _sequence(a), _sequence(b)
    if sa == sb or sorted(sa) != sorted(sb) or not any(w in _DIRECTIONAL for w in sa):
        return False
    # Even one word moved across "than" changes what is compared, so a moved word is not exempt.
    return _around(sa) != _around(sb)


# How far (in words of the compared sequence) a word may sit from a pivot and still be one of its roles.
_ROLE_WINDOW = 3


def _swapped_around(a: TextSignals, b: TextSignals) -> bool:
    """Two things changed sides of the pivot word that relates them: "X dislikes Y" / "Y dislikes X"
    (docs/cache.md's order rule). When both texts are the same words rearranged, every word within a
    few words of the pivot counts; otherwise only the content words both share, and the pivot's own
    neighbours must be the ones that crossed (a reworded question moves phrases around more freely).
    """
    full_a, full_b = [_stem(w) for w in a.lower], [_stem(w) for w in b.lower]
    if full_a != full_b and sorted(full_a) == sorted(full_b):
        ga, gb = _grouped(full_a), _grouped(full_b)
        if sorted(ga) != sorted(gb):  # the grouping itself moved: compare the plain words
            ga, gb = full_a, full_b
        if _crossed(ga, gb, _ROLE_WINDOW, _ROLE_WINDOW):
            return True
    sa, sb = _grouped(_sequence(a)), _grouped(_sequence(b))
    common = Counter(sa) & Counter(sb)
    return _crossed(_keep(sa, common), _keep(sb, common), 1, _ROLE_WINDOW)


def _grouped(seq: list[str]) -> list[str]:
    """"X and Y", "X or Y", "X vs Y" as one unordered unit: a symmetric pair has no direction to swap."""
    out: list[str] = []
    i = 0
    while i < len(seq):
        if i + 2 < len(seq) and seq[i + 1] in SYMMETRIC and seq[i] not in SYMMETRIC and seq[i + 2] not in SYMMETRIC:
            out.append("|".join(sorted((seq[i], seq[i + 2]))))
            i += 3
        else:
            out.append(seq[i])
            i += 1
    return out


def _keep(seq: list[str], counts: Counter[str]) -> list[str]:
    """``seq`` with only the words of ``counts``, each at most that many times, in order."""
    left = Counter(counts)
    out = []
    for w in seq:
        if left[w] > 0:
            out.append(w)
            left[w] -= 1
    return out


def _crossed(sa: list[str], sb: list[str], near: int, far: int) -> bool:
    """Some pivot has a word within ``near`` before it in ``sa`` that is within ``far`` after it in
    ``sb``, and one within ``near`` after it that is within ``far`` before it (counted with
    repeats, so a word that is on both sides in one text only moves by its surplus)."""
    ca, cb = Counter(sa), Counter(sb)
    for pivot in ca:
        if ca[pivot] != 1 or cb[pivot] != 1 or pivot in SYMMETRIC or (pivot in COMMON and pivot not in _DIRECTIONAL):
            continue
        i, j = sa.index(pivot), sb.index(pivot)
        la, ra = Counter(sa[max(0, i - near) : i]), Counter(sa[i + 1 : i + 1 + near])
        la_far, ra_far = Counter(sa[max(0, i - far) : i]), Counter(sa[i + 1 : i + 1 + far])
        lb, rb = Counter(sb[max(0, j - far) : j]), Counter(sb[j + 1 : j + 1 + far])
        went_right = (la - lb) & (rb - ra_far)
        went_left = (ra - rb) & (lb - la_far)
        if went_right and went_left:
            return True
    return False


def _around(seq: list[str]) -> Counter[tuple[str, str, str]]:
    return Counter(
        (seq[i - 1] if i else "", w, seq[i + 1] if i + 1 < len(seq) else "")
        for i, w in enumerate(seq) if w in _DIRECTIONAL
    )


def _role(s: TextSignals, e: str) -> str | None:
    """The relation word before ``e`` ("to Paris"), or "from" when "to"/"into" follows it."""
    i = next(i for i, t in enumerate(s.lower) if t == e or t == e + "'s")
    before = s.lower[i - 1] if i > 0 else ""
    after = s.lower[i + 1] if i + 1 < len(s.lower) else ""
    if before in RELATION_WORDS:
        return before
    return "from" if after in ("to", "into") else None


def _joined_symmetrically(s: TextSignals, shared: list[str] | set[str]) -> bool:
    stems = {w for e in shared for w in (e, e + "s", e + "'s")}
    idx = sorted(i for i, t in enumerate(s.lower) if t in stems)
    if len(idx) < 2:
        return False
    between = s.lower[idx[0] + 1 : idx[-1]]
    return any(t in SYMMETRIC for t in between) and not any(t in RELATION_WORDS for t in between)
