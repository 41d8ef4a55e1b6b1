"""The pool asked for whole (non-streamed) answers: what reaches the member, what comes back, and
the failover and timeout that apply before the answer, against real members on loopback."""

from __future__ import annotations

import pytest
from cloud_servers import HangingServer, ScriptedServer, llama_settings

from cloud import CloudPool, MemberTimeoutError, PoolEvent, PoolSettings, PoolUnavailableError
from cloud.local import ServerProcess
from models import Chunk, GenerationRequest, SamplingParams
from models.openai.client import request_body

QUESTION = ({"role": "user", "content": "What is the capital of France?"},)


def greedy(max_tokens: int = 12) -> GenerationRequest:
    return GenerationRequest(SamplingParams(max_tokens=max_tokens, temperature=0.0), messages=QUESTION)


def settings(**kw: object) -> PoolSettings:
    base: dict[str, object] = {"health_interval_s": 0, "first_token_timeout_s": 120, "stall_timeout_s": 60}
    return PoolSettings(**{**base, **kw})  # type: ignore[arg-type]


def test_a_whole_request_body_asks_for_no_stream() -> None:
    path, body = request_body(greedy(), "m", stream=False)
    assert path == "/chat/completions"
    assert body["stream"] is False and "stream_options" not in body
    assert request_body(greedy(), "m")[1]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("which", ["member", "llama"])
async def test_a_whole_answer_is_one_chunk_with_the_streamed_text(which: str, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(which)
    ms = server.settings if which == "member" else llama_settings(server)
    events: list[PoolEvent] = []
    async with CloudPool(settings(), members=[ms], on_event=events.append) as pool:
        streamed: list[Chunk] = [c async for c in pool.stream(greedy())]
        ttft = pool.ttft_ms_p50()
        events.clear()
        whole = await pool.open(greedy(), whole=True)
        chunks: list[Chunk] = [c async for c in whole]
        assert whole.member == ms.name and whole.failed == []
        assert pool.status()[0].outstanding == 0
    (answer,) = chunks
    assert answer.text == "".join(c.text for c in streamed) != ""
    final = streamed[-1]
    assert final.finish_reason is not None and answer.finish_reason == final.finish_reason
    assert answer.usage is not None and final.usage is not None
    assert answer.usage.completion_tokens == final.usage.completion_tokens
    if which == "member":
        assert answer.usage == final.usage
    else:  # llama.cpp streams no usage (the pool counts 0 prompt tokens); its whole answer has it
        assert (final.usage.prompt_tokens, answer.usage.prompt_tokens > 0) == (0, True)
    assert [(e.kind, e.member) for e in events] == [("started", ms.name), ("success", ms.name)]
    assert ttft is not None and pool.ttft_ms_p50() == ttft  # a whole answer has no time to first token


async def test_a_5xx_before_the_whole_answer_moves_to_another_member(llama: ServerProcess) -> None:
    broken = ScriptedServer(
        [("send", b'{"error": {"message": "boom", "type": "server_error"}}')],
        status="500 Internal Server Error",
        content_type="application/json",
    )
    events: list[PoolEvent] = []
    # Not started (no health round): the scripted server would answer /health with 500 as well.
    pool = CloudPool(
        settings(retries=1, backoff_initial_s=0.01),
        members=[broken.settings("broken"), llama_settings(llama)],  # a tie goes to the first: broken
        on_event=events.append,
    )
    try:
        whole = await pool.open(greedy(4), whole=True)
        (answer,) = [c async for c in whole]
        assert answer.text and answer.finish_reason == "length"
        assert (whole.member, whole.failed) == ("llama", ["broken"])
        assert [(e.kind, e.member) for e in events] == [
            ("failure", "broken"),
            ("retry", "broken"),
            ("started", "llama"),
            ("success", "llama"),
        ]
        assert events[0].error == "member broken answered 500: boom"
        assert broken.connections == 1
        assert [(s.name, s.failures) for s in pool.status()] == [("broken", 1), ("llama", 0)]
    finally:
        await pool.aclose()
        broken.close()


async def test_the_whole_answer_timeout_fires_not_the_first_token_one() -> None:
    hang = HangingServer()
    events: list[PoolEvent] = []
    pool = CloudPool(
        settings(first_token_timeout_s=600, whole_timeout_s=0.5, retries=0),
        members=[hang.settings("hang")],
        on_event=events.append,
    )
    try:
        with pytest.raises(PoolUnavailableError) as info:
            await anext(pool.stream(greedy(), whole=True))
        cause = info.value.__cause__
        assert isinstance(cause, MemberTimeoutError)
        assert cause.message == "member hang gave no whole answer within 0.5s"
        assert cause.code == "member_timeout"
        assert [e.kind for e in events] == ["failure", "unavailable"]
        assert (pool.status()[0].failures, pool.status()[0].outstanding) == (1, 0)
    finally:
        await pool.aclose()
        hang.close()


async def test_a_member_cut_before_its_whole_answer_is_a_failure_before_output(llama: ServerProcess) -> None:
    dying = ScriptedServer([("cut",)], content_type="application/json")
    events: list[PoolEvent] = []
    pool = CloudPool(
        settings(retries=1, backoff_initial_s=0.01),
        members=[dying.settings("dying"), llama_settings(llama)],
        on_event=events.append,
    )
    try:
        whole = await pool.open(greedy(4), whole=True)
        (answer,) = [c async for c in whole]
        assert answer.text
        assert (whole.member, whole.failed) == ("llama", ["dying"])
        assert [e.kind for e in events if e.member == "dying"] == ["failure", "retry"]
        assert (events[0].error or "").startswith("member dying: connection lost")
    finally:
        await pool.aclose()
        dying.close()


async def test_with_hedging_on_the_member_streams_even_for_a_whole_request(llama: ServerProcess) -> None:
    async with CloudPool(settings(hedging=True, hedge_after_s=60), members=[llama_settings(llama)]) as pool:
        chunks = [c async for c in pool.stream(greedy(), whole=True)]
    assert len(chunks) > 2  # one per delta, then the final one: a stream, not one whole answer
    assert chunks[-1].text == "" and chunks[-1].finish_reason is not None


async def test_a_whole_text_completion_matches_the_streamed_one(llama: ServerProcess) -> None:
    counting = GenerationRequest(SamplingParams(max_tokens=6, temperature=0.0), prompt="1, 2, 3,")
    async with CloudPool(settings(), members=[llama_settings(llama)]) as pool:
        streamed = [c async for c in pool.stream(counting)]
        (whole,) = [c async for c in pool.stream(counting, whole=True)]
    assert whole.text == "".join(c.text for c in streamed) != ""
    assert whole.finish_reason == streamed[-1].finish_reason == "length"
