"""Fallback logic around the engine boundary, with scripted engines (the real-member tests are in
test_hybrid*.py): :func:`router.fallback.start` and the router's stream, :class:`router.pipeline.RoutedStream`,
which continues a broken stream by :func:`router.fallback.resume`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from models import Chunk, EngineLoad, EngineUnavailableError, GenerationRequest, SamplingParams, StreamBrokenError, Usage, collect
from router.fallback import Attempt, StreamPlan, start
from router.pipeline import RoutedStream
from router.record import RequestRecord


class Broken(StreamBrokenError):
    pass


class Down(EngineUnavailableError):
    pass


class Scripted:
    """Yields ``pieces``; raises ``fail_at`` (index) or fails before the first token."""

    def __init__(self, name: str, pieces: list[str], fail_at: int | None = None, down: bool = False) -> None:
        self.name = name
        self.pieces = pieces
        self.fail_at = fail_at
        self.down = down
        self.requests: list[GenerationRequest] = []

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        if self.down:
            raise Down(f"{self.name} is down")
        for i, piece in enumerate(self.pieces):
            if i == self.fail_at:
                raise Broken(f"{self.name} cut after {i} chunks")
            yield Chunk(piece)
        yield Chunk("", "stop", Usage(prompt_tokens=50, completion_tokens=len(self.pieces)))

    def load(self) -> EngineLoad:
        return EngineLoad(0, 0, 1)

    async def aclose(self) -> None:
        return None


REQ = GenerationRequest(params=SamplingParams(temperature=0), messages=({"role": "user", "content": "q"},))


def routed(plan: StreamPlan, started: Any, req: GenerationRequest = REQ, prompt_tokens: int = 7) -> RoutedStream:
    """The router's stream of ``started``, its decision record kept in ``.records`` (no node here)."""
    records: list[tuple[Chunk | None, str | None]] = []
    features = SimpleNamespace(prompt_tokens=prompt_tokens)
    record = RequestRecord(req, plan=plan, features=features)  # type: ignore[arg-type]
    recorder = SimpleNamespace(record=record, done=lambda final, error: records.append((final, error)))
    stream = RoutedStream(recorder, started)  # type: ignore[arg-type]
    stream.records = records  # type: ignore[attr-defined]
    return stream


async def run(plan: StreamPlan) -> tuple[list[Chunk], StreamPlan]:
    stream = routed(plan, await start(plan, REQ))
    chunks = [c async for c in stream]
    assert stream.records == [(chunks[-1], None)]  # type: ignore[attr-defined] - recorded once, as answered
    return chunks, plan


async def test_failure_before_first_token_moves_to_next_target() -> None:
    cloud = Scripted("cloud", ["x"], down=True)
    edge = Scripted("edge", ["Hel", "lo"])
    chunks, plan = await run(StreamPlan([cloud, edge]))
    assert "".join(c.text for c in chunks) == "Hello"
    assert plan.path() == "cloud->edge"
    assert [a.outcome for a in plan.attempts] == ["failed-before-first-token", "ok"]
    assert edge.requests[0].assistant_prefix == ""


async def test_mid_stream_break_continues_from_the_text_so_far() -> None:
    cloud = Scripted("cloud", ["The ", "answer ", "is "], fail_at=2)
    edge = Scripted("edge", ["forty-", "two."])
    chunks, plan = await run(StreamPlan([cloud, edge]))
    assert "".join(c.text for c in chunks) == "The answer forty-two."
    assert edge.requests[0].assistant_prefix == "The answer "
    assert edge.requests[0].messages == REQ.messages
    finals = [c for c in chunks if c.finish_reason is not None]
    assert len(finals) == 1 and finals[0] is chunks[-1]
    # The client's usage: the original prompt, two chunks before the break plus two after.
    assert finals[0].usage == Usage(prompt_tokens=7, completion_tokens=4)
    assert plan.path() == "cloud->edge"
    assert plan.attempts[0].outcome == "broken-mid-stream"
    assert "cut after 2 chunks" in (plan.attempts[0].error or "")


async def test_two_breaks_then_the_last_target() -> None:
    a = Scripted("cloud", ["a1 ", "a2 "], fail_at=1)
    b = Scripted("cloud", ["b1 ", "b2 "], fail_at=1)
    edge = Scripted("edge", ["e1"])
    chunks, plan = await run(StreamPlan([a, b, edge]))
    assert "".join(c.text for c in chunks) == "a1 b1 e1"
    assert edge.requests[0].assistant_prefix == "a1 b1 "
    assert plan.path() == "cloud->cloud->edge"


async def test_every_target_down_raises_the_last_error() -> None:
    with pytest.raises(Down, match="edge is down"):
        await run(StreamPlan([Scripted("cloud", [], down=True), Scripted("edge", [], down=True)]))


async def test_break_with_no_target_left_propagates() -> None:
    plan = StreamPlan([Scripted("cloud", ["a", "b"], fail_at=1)])
    stream = routed(plan, await start(plan, REQ))
    with pytest.raises(Broken):
        await collect(stream)
    ((final, error),) = stream.records  # type: ignore[attr-defined]
    assert final is None and error is not None and error.startswith("Broken: cloud cut after 1 chunks")


def test_member_hops_count_before_the_cloud_attempt_that_answered() -> None:
    plan = StreamPlan([])
    plan.attempts = [Attempt("cloud", "broken-mid-stream"), Attempt("edge", "ok")]
    assert plan.path() == "cloud->edge"
    plan.attempts = [Attempt("cloud", "broken-mid-stream", member_hops=1), Attempt("edge", "ok")]
    assert plan.path() == "cloud->cloud->edge"  # one member failed before another started
    plan.attempts = [Attempt("cloud", "failed-before-first-token"), Attempt("edge", "ok")]
    assert plan.path() == "cloud->edge"  # the pool gave up altogether: one cloud hop
    plan.attempts = [Attempt("cloud", "ok")]
    assert plan.path() is None
    plan.attempts = [Attempt("cloud", "ok", member="b", member_hops=1)]
    assert (plan.path(), plan.member) == ("cloud->cloud", "b")

async def test_a_continuation_asks_only_for_what_max_tokens_has_left() -> None:
    req = GenerationRequest(params=SamplingParams(temperature=0, max_tokens=5), messages=REQ.messages)
    cloud = Scripted("cloud", ["a ", "b ", "c ", "d "], fail_at=3)
    edge = Scripted("edge", ["e ", "f "])
    plan = StreamPlan([cloud, edge])
    chunks = [c async for c in routed(plan, await start(plan, req), req)]
    assert edge.requests[0].params.max_tokens == 2  # 5 asked, 3 already sent
    assert edge.requests[0].params.temperature == 0
    assert chunks[-1].usage == Usage(prompt_tokens=7, completion_tokens=5)


async def test_a_break_after_max_tokens_chunks_finishes_with_length_and_no_continuation() -> None:
    req = GenerationRequest(params=SamplingParams(max_tokens=2), messages=REQ.messages)
    cloud = Scripted("cloud", ["a ", "b ", "c "], fail_at=2)
    edge = Scripted("edge", ["never"])
    plan = StreamPlan([cloud, edge])
    chunks = [c async for c in routed(plan, await start(plan, req), req, prompt_tokens=3)]
    assert [c.text for c in chunks] == ["a ", "b ", ""]
    assert (chunks[-1].finish_reason, chunks[-1].usage) == ("length", Usage(prompt_tokens=3, completion_tokens=2))
    assert edge.requests == []
