"""vLLM's ``stop_reason`` on OpenAI answers (models.openai.stream): the stop sequence that ended a
choice, only when one did; the member sends it and the node's own API passes it on."""

from __future__ import annotations

import json

from models import Usage
from models.openai.stream import ChunkWriter


def _events(raw: bytes) -> list[dict[str, object]]:
    return [json.loads(p.removeprefix(b"data: ")) for p in raw.strip().split(b"\n\n") if p != b"data: [DONE]"]


def test_a_whole_answer_ended_by_a_stop_word_carries_it() -> None:
    body = ChunkWriter("text", "m").whole("1, 2", "stop", Usage(2, 3), stop_word=", 3")
    assert body["choices"][0]["stop_reason"] == ", 3"
    chat = ChunkWriter("chat", "m").whole("hi", "stop", Usage(2, 1), stop_word="\n")
    assert (chat["choices"][0]["finish_reason"], chat["choices"][0]["stop_reason"]) == ("stop", "\n")


def test_no_stop_word_or_a_length_cut_leaves_the_field_out() -> None:
    assert "stop_reason" not in ChunkWriter("text", "m").whole("1, 2", "stop", Usage(2, 3))["choices"][0]
    assert "stop_reason" not in ChunkWriter("text", "m").whole("1, 2", "length", Usage(2, 3), stop_word="x")["choices"][0]


def test_a_stream_s_finish_event_carries_it_for_its_choice() -> None:
    writer = ChunkWriter("chat", "m")
    first = _events(writer.finish("stop", Usage(1, 1), index=0, last=False, stop_word="END"))
    second = _events(writer.finish("stop", Usage(1, 2), index=1, last=True))
    assert [c["stop_reason"] for e in first for c in e["choices"]] == ["END"]  # type: ignore[index, union-attr]
    assert [c.get("stop_reason") for e in second for c in e["choices"]] == [None]  # type: ignore[union-attr]
