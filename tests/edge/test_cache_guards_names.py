"""The entity guard's spelling tolerances and the order guard's rearrangements, both directions."""

from __future__ import annotations

import pytest

from edge.cache.guards import check as guard_check

SAME_NAMES = [
    ("How did Donald Trump win the election?", "How did Trump win the election?"),
    ("Why does Scotland want to leave the United Kingdom?", "Why does Scotland want to leave the U.K.?"),
    ("Who will be the next president of the USA?", "Who will be the next president of the United States of America?"),
    ("What is your review of MS Dhoni: The Untold Story?", "What is your review of M.S. Dhoni: The Untold Story?"),
    ("How will the ban affect India?", "How will the ban affect the Indian economy?"),
    ("Which is the best laptop to buy under INR 45K?", "What is the best laptop under 45k?"),
    ("What are the best TVs under 500?", "What is the best TV under 500?"),
    ("Music: What is your favourite song at the moment?", "What is your favourite song at the moment?"),
    ("Which are the best places to visit in Goa?", "Which are the best places to visit in GOA?"),
]
OTHER_NAMES = [
    ("How did Donald Trump win the election?", "How did Ivanka Trump win the election?"),
    ("Have you worked on a project in rural Southeast Asia?", "Have you worked on a project in rural South Asia?"),
    ("What is the best phone under 500 USD?", "What is the best phone under 500 INR?"),
    ("What is the best college in India?", "What is the best college in Indiana?"),
    ("What are the differences between Quora, Reddit and Yahoo Answers?",
     "What are the differences between Quora and Yahoo Answers?"),
    ("How do I install Docker on Ubuntu?", "How do I install Docker on Fedora?"),
    ("How does Quora choose its Top Question Writers?", "How are top writers selected by Quora?"),
]
REARRANGED = [
    ("What is the capital of France?", "What is the France of capital?"),
    ("Why do cats hate dogs?", "Why do dogs hate cats?"),
    ("Should I learn Python before Java?", "Should I learn Java before Python?"),
    ("Why is the dollar getting stronger than other currencies?",
     "Why is the dollar other stronger than getting currencies?"),
    ("Why is a cheetah faster than a lion?", "Why is a faster than cheetah lion?"),  # one word moved across "than"
    ("What is the best time of year to visit the capital of Peru?",
     "What is the best capital of year to visit the time of Peru?"),
]
# Direction in general: two things changed sides of the word relating them (a verb, "than"), with
# more than a two-word swap, or with other words around them changed.
SWAPPED_ROLES = [
    ("Why do cats dislike big dogs?", "Why do big dogs dislike cats so much?"),
    ("why do indian men dislike chinese women?", "why do chinese women dislike indian men?"),
    ("Does my boss trust the new intern?", "Does the new intern trust my boss?"),
    ("Is light sucked in faster than its speed?", "Is light sucked its faster than in speed?"),
    ("Is it better or worse than 20/20 vision?", "Is it better 20 worse than or/20 vision?"),
]
SAME_ORDER = [
    ("What is the capital of France in 2010?", "In 2010, what is the capital of France?"),
    ("How can I improve my knowledge of English?", "How can I improve my English knowledge?"),
    ("Compare Python and Java", "Compare Java and Python"),
    ("What are the best places to visit in India for a family?", "In India, what are the best places to visit for a family?"),
    ("Which is better, iPhone or Android?", "Android or iPhone, which is better?"),
    ("How can I track an Internet fraudster who scammed me?",
     "I have been scammed by an Internet fraudster, how can I track him?"),
    ("How do I, as a beginner, learn Python in 2017?", "In 2017, how do I learn Python as a beginner?"),
]


@pytest.mark.parametrize(("a", "b"), SAME_NAMES)
def test_the_same_name_written_differently_passes(a: str, b: str) -> None:
    assert guard_check(a, b) is None
    assert guard_check(b, a) is None


@pytest.mark.parametrize(("a", "b"), OTHER_NAMES)
def test_a_different_or_an_extra_name_is_refused(a: str, b: str) -> None:
    assert guard_check(a, b) == "entity"
    assert guard_check(b, a) == "entity"


@pytest.mark.parametrize(("a", "b"), REARRANGED)
def test_the_same_words_around_a_directional_word_rearranged_are_refused(a: str, b: str) -> None:
    assert guard_check(a, b) == "order"
    assert guard_check(b, a) == "order"


@pytest.mark.parametrize(("a", "b"), SAME_ORDER)
def test_a_moved_phrase_or_a_symmetric_pair_passes(a: str, b: str) -> None:
    assert guard_check(a, b) is None
    assert guard_check(b, a) is None


@pytest.mark.parametrize(("a", "b"), SWAPPED_ROLES)
def test_two_things_that_changed_sides_of_the_word_relating_them_are_refused(a: str, b: str) -> None:
    assert guard_check(a, b) == "order"
    assert guard_check(b, a) == "order"
