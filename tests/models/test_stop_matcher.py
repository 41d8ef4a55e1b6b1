from __future__ import annotations

from models.stops import StopMatcher


def feed_all(matcher: StopMatcher, pieces: list[str]) -> tuple[str, bool]:
    out = []
    for piece in pieces:
        text, hit = matcher.feed(piece)
        out.append(text)
        if hit:
            return "".join(out), True
    return "".join(out) + matcher.flush(), False


def test_stop_sequence_split_across_tokens_is_cut_cleanly() -> None:
    assert feed_all(StopMatcher(("\nUser:",)), ["Hello", " there", "\n", "Us", "er:", " more"]) == ("Hello there", True)


def test_partial_match_that_does_not_complete_is_released() -> None:
    matcher = StopMatcher(("STOP",))
    assert matcher.feed("abcST") == ("abc", False)
    assert matcher.feed("OX") == ("STOX", False)
    assert matcher.flush() == ""


def test_earliest_of_several_stops_wins() -> None:
    assert feed_all(StopMatcher(("b", "a")), ["xxab"]) == ("xx", True)


def test_no_stops_passes_text_through() -> None:
    matcher = StopMatcher(())
    assert matcher.feed("anything") == ("anything", False)
    assert matcher.flush() == ""


def test_held_text_is_flushed_at_end_of_stream() -> None:
    assert feed_all(StopMatcher(("</s>",)), ["the end<", "/"]) == ("the end</", False)


def test_stop_sequence_is_cut_across_deltas() -> None:
    matcher = StopMatcher(("END", "\n\n"))
    assert matcher.feed("abc E") == ("abc ", False)
    assert matcher.feed("N") == ("", False)
    assert matcher.feed("Dxyz") == ("", True)
    assert matcher.hit and matcher.flush() == ""


def test_false_alarm_is_released_and_nothing_follows_a_hit() -> None:
    matcher = StopMatcher(("END",))
    assert matcher.feed("the E") == ("the ", False)
    assert matcher.feed("ND") == ("", True)
    assert matcher.feed("more") == ("", True)
    other = StopMatcher(("END",))
    assert other.feed("an EN") == ("an ", False)
    assert other.feed("Xtra") == ("ENXtra", False)
    assert other.feed("E") == ("", False)
    assert other.flush() == "E" and not other.hit


def test_the_matched_stop_sequence_is_kept() -> None:
    matcher = StopMatcher(("b", "a"))
    assert matcher.matched is None
    assert feed_all(matcher, ["xx", "ab"]) == ("xx", True)
    assert matcher.matched == "a"  # the earliest in the text, not the first listed


def test_at_a_tie_the_first_listed_stop_is_the_match_and_no_match_leaves_none() -> None:
    tie = StopMatcher(("ab", "a"))
    assert feed_all(tie, ["xab"]) == ("x", True) and tie.matched == "ab"
    none = StopMatcher(("zz",))
    assert feed_all(none, ["abc", "z"]) == ("abcz", False) and none.matched is None
