"""Token ids to text deltas (real tokenizer of the served model) and stop sequences."""

from __future__ import annotations

from typing import Any

import pytest

from cloud.member.text import DeltaDecoder
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
