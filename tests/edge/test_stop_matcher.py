from __future__ import annotations

from edge.text import StopMatcher


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
