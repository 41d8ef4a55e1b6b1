"""The words the guards read: negators and negating prefixes, axes of polarity, number words,
the common words that name nothing, and the words that give two things a direction."""

from __future__ import annotations

import re

NEGATORS = frozenset(
    "not no never none nobody nothing nowhere neither nor cannot without unable isn't aren't wasn't "
    "weren't don't doesn't didn't won't wouldn't can't couldn't shouldn't mustn't hasn't haven't hadn't".split()
)
# Axes of polarity: words on the two sides of each axis answer opposite questions.
POLARITY: tuple[tuple[str, str], ...] = (
    ("on enable enabled enabling activate activated turnon", "off disable disabled disabling deactivate deactivated turnoff"),
    ("good better best positive pros advantage advantages benefit benefits",
     "bad worse worst negative cons disadvantage disadvantages drawback drawbacks"),
    ("increase increasing raise raising grow growing more higher high maximum max most",
     "decrease decreasing lower lowering reduce reducing shrink less fewer low minimum min least"),
    ("start starting begin beginning open opening launch", "stop stopping end ending close closing quit"),
    ("add adding insert include including", "remove removing delete deleting exclude excluding"),
    ("install installing", "uninstall uninstalling"),
    ("connect connecting", "disconnect disconnecting"),
    ("lock locking", "unlock unlocking"),
    ("show showing display", "hide hiding"),
    ("upload uploading", "download downloading"),
    ("import importing", "export exporting"),
    ("encrypt encrypting encryption", "decrypt decrypting decryption"),
    ("buy buying purchase", "sell selling"),
    ("win winning", "lose losing"),
    ("true", "false"),
    ("yes", "no"),
    ("before", "after"),
    ("above", "below"),
    ("hot warm", "cold cool"),
    ("fast faster fastest quick", "slow slower slowest"),
    ("big bigger biggest large larger largest", "small smaller smallest little"),
    ("love", "hate"),
    ("like likes", "dislike dislikes"),
    ("allow allowed permit", "deny denied block forbid"),
    ("accept accepted", "reject rejected"),
    ("push", "pull"),
    ("enter", "exit"),
    ("gain gaining", "lose losing"),
    ("rich", "poor"),
    ("cheap cheapest", "expensive"),
    ("easy easiest", "hard hardest difficult"),
    ("safe safer safest", "dangerous unsafe"),
    ("inside in within", "outside"),
    ("legal", "illegal"),
    ("light", "dark"),
    ("left", "right"),
    ("north", "south"),
    ("east", "west"),
    ("male men man boy boys", "female women woman girl girls"),
)
AXIS: dict[str, tuple[int, int]] = {}
for _i, (_pos, _neg) in enumerate(POLARITY):
    for _w in _pos.split():
        AXIS.setdefault(_w, (_i, +1))
    for _w in _neg.split():
        AXIS.setdefault(_w, (_i, -1))

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                      "ninety": 90, "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9,
                      "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "half": 0.5, "twice": 2,
                      "double": 2, "triple": 3, "dozen": 12})
# "one" is mostly a pronoun ("which one", "one should"); "one apple" vs "two apples" still differs.
del NUMBER_WORDS["one"]
ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")

# Capitalized words that are not names: sentence openers, pronouns, question words, common verbs.
COMMON = frozenset(
    """a an the this that these those it its i i'm i've i'd i'll me my we our you your he she they them their
    his her what whats what's which who whom whose when where why how is are was were be been being am do does
    did done have has had having can could will would should shall may might must if then than so and or but
    not no yes please tell explain describe give list write show find make create compare define summarize
    summarise translate calculate suggest recommend help name let lets let's there here hi hello hey dear
    ok okay thanks thank any some all each every most many much more less best good better top new old
    one two three first second also just only even still very really actually generally basically
    why's how's where's who's is it in on at by for of to from with about as into over after before
    during between without within under above up down out off again further once why should""".split()
)
RELATION_WORDS = frozenset("to into from than over against toward towards beats".split())
# A negating prefix turns a word into its opposite ("acceptable" / "unacceptable", "legal" /
# "illegal"); "in-" and its forms only before adjective endings ("intake" is no "take"), and the
# common words that merely start like one are not negations.
NEG_PREFIXES = ("non", "un", "dis", "in", "im", "il", "ir")
ADJECTIVE_ENDINGS = ("able", "ible", "al", "ant", "ent", "ive", "ate", "ect", "ete", "ure", "ular", "ous", "id", "ic", "ed")
NOT_NEGATED = frozenset(
    """under until unless union unit unite united universe university uniform unique discover display discount
    dispose disease dispatch dismiss discuss distance district dispense disperse distract distill distort
    disguise dish disk""".split()
)
SYMMETRIC = frozenset("and or vs versus & , with".split())
