"""Token ids to text deltas (real tokenizer of the served model) and stop sequences."""

from __future__ import annotations

from typing import Any

import pytest

from cloud.member.text import DeltaDecoder, StopCutter
from cloud.member.weights import ensure_weights
from models import EDGE_DEFAULT, default_models_dir


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ensure_weights(EDGE_DEFAULT, default_models_dir()))


@pytest.mark.parametrize(
    "text", ["Hello, world! Paris is nice.", "Café ☕ — naïve 日本語 🤖🎉", "  two  spaces\n\nnew"]
)
def test_deltas_rebuild_the_text_with_whole_characters(tokenizer: Any, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False).input_ids
    decoder = DeltaDecoder(tokenizer)
    deltas = [decoder.feed(t) for t in ids]
    deltas.append(decoder.flush())
    assert "".join(deltas) == text
    assert all("\ufffd" not in d for d in deltas)


def test_multibyte_character_split_across_tokens_is_held(tokenizer: Any) -> None:
    ids = tokenizer("🤖", add_special_tokens=False).input_ids
    assert len(ids) > 1  # byte-level BPE splits the emoji's 4 bytes
    decoder = DeltaDecoder(tokenizer)
    assert [decoder.feed(t) for t in ids[:-1]] == [""] * (len(ids) - 1)
    assert decoder.feed(ids[-1]) == "🤖"


def test_stop_sequence_is_cut_across_deltas() -> None:
    cutter = StopCutter(("END", "\n\n"))
    assert cutter.feed("abc E") == "abc "
    assert cutter.feed("N") == ""
    assert cutter.feed("Dxyz") == ""
    assert cutter.hit and cutter.flush() == ""


def test_false_alarm_is_released_and_flush_returns_the_rest() -> None:
    cutter = StopCutter(("END",))
    assert cutter.feed("the E") == "the "
    assert cutter.feed("ND") == ""
    assert cutter.hit
    other = StopCutter(("END",))
    assert other.feed("an EN") == "an "
    assert other.feed("Xtra") == "ENXtra"
    assert other.feed("E") == ""
    assert other.flush() == "E" and not other.hit
    assert StopCutter(()).feed("anything") == "anything"
