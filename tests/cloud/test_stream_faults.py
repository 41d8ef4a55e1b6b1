"""Where a stream breaks decides what the caller may do: before the first token the pool retries
elsewhere; after it, StreamBrokenError carries the partial text. A scripted HTTP server on loopback
plays each fault byte for byte."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from cloud_servers import ScriptedServer, chat_chunk, sse

from cloud import (
    CloudPool,
    CloudRequestError,
    Member,
    MemberConnectError,
    MemberSettings,
    MemberHTTPError,
    MemberProtocolError,
    PoolEvent,
    PoolSettings,
    StreamBrokenError,
)
from models import Chunk, GenerationRequest, SamplingParams, Usage, collect
from loadtest.servers import serve_app

REQ = GenerationRequest(
    SamplingParams(max_tokens=16, temperature=0.0), messages=({"role": "user", "content": "hi"},)
)
PS = PoolSettings(
    health_interval_s=0, first_token_timeout_s=5, stall_timeout_s=0.5, retries=1, backoff_initial_s=0.01
)
HELLO = [("send", sse(chat_chunk(""))), ("send", sse(chat_chunk("Hello"))), ("send", sse(chat_chunk(" wor")))]


async def _drain(member: Member) -> list[Chunk]:
    return [c async for c in member.stream(REQ)]


async def _run(script: Sequence[tuple[object, ...]], **kw: str) -> tuple[list[str], BaseException | None]:
    server = ScriptedServer(script, **kw)
    member = Member(server.settings("scripted"), PS)
    got: list[str] = []
    try:
        async for chunk in member.stream(REQ):
            got.append(chunk.text)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return got, exc
    finally:
        await member.aclose()
        server.close()
    return got, None


async def test_complete_stream_without_usage_gets_a_counted_usage() -> None:
    got, exc = await _run([*HELLO, ("send", sse(chat_chunk("ld"), chat_chunk(None, "stop"), "[DONE]"))])
    assert exc is None
    assert got == ["Hello", " wor", "ld", ""]


def _usage_chunk(text: str | None, finish: str | None, prompt: int, completion: int) -> str:
    chunk = json.loads(chat_chunk(text, finish))
    chunk["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return json.dumps(chunk)


async def test_a_running_usage_counts_only_once_the_answer_has_finished() -> None:
    # A running count on the text chunks, none on the finish: the usage after it is the answer's.
    script = [("send", sse(_usage_chunk("Hello", None, 3, 1), _usage_chunk(" wor", None, 3, 2))),
              ("send", sse(chat_chunk(None, "stop"))),
              ("send", sse(_usage_chunk(None, None, 3, 3), "[DONE]"))]
    server = ScriptedServer(script)
    member = Member(server.settings("scripted"), PS)
    try:
        done = await collect(member.stream(REQ))
    finally:
        await member.aclose()
        server.close()
    assert (done.text, done.finish_reason, done.usage) == ("Hello wor", "stop", Usage(3, 3))


async def test_the_answer_ends_with_its_usage_before_the_member_sends_done() -> None:
    done = threading.Event()
    usage = json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    server = ScriptedServer([*HELLO, ("send", sse(chat_chunk(None, "stop"), usage)), ("wait", done), ("send", sse("[DONE]"))])
    member = Member(server.settings("scripted"), PS)
    chunks = member.stream(REQ)
    try:
        # The final chunk comes while the member still holds back its [DONE] (the stall limit is 0.5 s).
        got = [await anext(chunks) for _ in range(3)]
        assert [(c.text, c.finish_reason, c.usage) for c in got] == [
            ("Hello", None, None), (" wor", None, None), ("", "stop", Usage(3, 2))
        ]
        assert member.outstanding == 0
        done.set()
        with pytest.raises(StopAsyncIteration):  # what follows is read as the stream closes
            await anext(chunks)
        assert member.breaker.failures == 0
    finally:
        done.set()
        await chunks.aclose()  # type: ignore[attr-defined]
        await member.aclose()
        server.close()


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ([("cut",)], "connection lost"),
        ([("sleep", 3.0), ("send", sse(chat_chunk("late")))], "silent for 0.5s after a chunk"),
        ([("send", b'data: {"choices": [{"delta": {"content": "x"\n\n')], "malformed stream"),
        ([("send", sse("[DONE]"))], "without a finish_reason"),
        ([], "ended without a finish_reason"),
        ([("send", sse('{"error": {"message": "rank 2 died", "type": "server_error"}}'))], "rank 2 died"),
    ],
    ids=["cut", "stall", "malformed", "done-without-finish", "eof", "error-event"],
)
async def test_breaks_after_the_first_token_carry_the_partial_text(
    tail: list[tuple[object, ...]], reason: str
) -> None:
    got, exc = await _run([*HELLO, *tail])
    assert got == ["Hello", " wor"]
    assert isinstance(exc, StreamBrokenError)
    assert exc.partial == "Hello wor" and exc.member == "scripted"
    assert reason in exc.message


@pytest.mark.parametrize(
    ("script", "kw", "error", "text"),
    [
        ([("send", sse(chat_chunk("")))], {}, MemberProtocolError, "without a finish_reason"),
        ([("send", sse(chat_chunk(""))), ("cut",)], {}, MemberConnectError, "connection lost"),
        ([("send", b"data: not json\n\n")], {}, MemberProtocolError, "invalid JSON"),
        (
            [("send", b'{"error": {"message": "overloaded"}}')],
            {"status": "503 Service Unavailable", "content_type": "application/json"},
            MemberHTTPError,
            "answered 503: overloaded",
        ),
        (
            [("send", b'{"ok": true}')],
            {"content_type": "application/json"},
            MemberProtocolError,
            "text/event-stream",
        ),
    ],
    ids=["no-finish", "cut", "malformed", "503", "not-sse"],
)
async def test_failures_before_the_first_token_are_member_errors(
    script: list[tuple[object, ...]], kw: dict[str, str], error: type[Exception], text: str
) -> None:
    got, exc = await _run(script, **kw)
    assert got == []
    assert type(exc) is error
    assert text in str(exc)
    assert getattr(exc, "retryable", None) is True


async def test_a_bad_request_is_the_requests_fault() -> None:
    body = b'{"error": {"message": "too long", "param": "messages", "code": "context_length_exceeded"}}'
    got, exc = await _run([("send", body)], status="400 Bad Request", content_type="application/json")
    assert isinstance(exc, CloudRequestError)
    assert (exc.message, exc.param, exc.code) == ("too long", "messages", "context_length_exceeded")


async def test_pool_retries_a_failure_before_the_first_token_on_another_member() -> None:
    broken = ScriptedServer([("send", sse(chat_chunk(""))), ("cut",)])
    good = ScriptedServer([*HELLO, ("send", sse(chat_chunk(None, "length")))])
    events: list[PoolEvent] = []
    pool = CloudPool(PS, members=[broken.settings("broken"), good.settings("good")], on_event=events.append)
    try:
        stream = await pool.open(REQ)
        done = await collect(stream)
        assert (done.text, done.finish_reason, done.usage) == ("Hello wor", "length", Usage(0, 2))
        # The stream itself says who answered and who failed before it.
        assert (stream.member, stream.failed) == ("good", ["broken"])
        assert [(e.kind, e.member) for e in events] == [
            ("failure", "broken"),
            ("retry", "broken"),
            ("started", "good"),
            ("success", "good"),
        ]
    finally:
        await pool.aclose()
        broken.close()
        good.close()


async def test_pool_does_not_retry_after_the_first_token() -> None:
    broken = ScriptedServer([*HELLO, ("cut",)])
    good = ScriptedServer([*HELLO, ("send", sse(chat_chunk(None, "stop")))])
    events: list[PoolEvent] = []
    pool = CloudPool(PS, members=[broken.settings("broken"), good.settings("good")], on_event=events.append)
    try:
        got: list[str] = []
        with pytest.raises(StreamBrokenError) as info:
            async for chunk in pool.stream(REQ):
                got.append(chunk.text)
        assert info.value.partial == "".join(got) == "Hello wor"
        assert [(e.kind, e.member) for e in events] == [("started", "broken"), ("stream_broken", "broken")]
        assert good.connections == 0
        assert pool.status()[0].failures == 1
    finally:
        await pool.aclose()
        broken.close()
        good.close()


async def test_a_continuation_avoids_the_member_whose_stream_broke() -> None:
    first = ScriptedServer([*HELLO, ("send", sse(chat_chunk(None, "stop")))])
    second = ScriptedServer([("send", sse(chat_chunk("ld"), chat_chunk(None, "stop")))])
    pool = CloudPool(PS, members=[first.settings("a"), second.settings("b")])
    try:
        cont = GenerationRequest(REQ.params, messages=REQ.messages, assistant_prefix="Hello wor")
        done = await collect(pool.stream(cont, avoid=("a",)))
        assert done.text == "ld"
        assert (first.connections, second.connections) == (0, 1)
    finally:
        await pool.aclose()
        first.close()
        second.close()


async def test_the_request_id_goes_to_the_member() -> None:
    server = ScriptedServer([*HELLO, ("send", sse(chat_chunk(None, "stop"), "[DONE]"))])
    member = Member(server.settings("scripted"), PS)
    try:
        await collect(member.stream(REQ))
    finally:
        await member.aclose()
        server.close()
    headers = server.heads[0].decode().lower().split("\r\n")[1:]
    assert f"x-request-id: {REQ.request_id}" in headers


def _sse_member(clients: list[tuple[str, int]]) -> Any:
    """A raw ASGI member that answers every chat request with one short stream, noting the client."""
    body = sse(chat_chunk("Hi"), chat_chunk(None, "stop"), "[DONE]")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/v1/chat/completions":
            clients.append(scope["client"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    return app


async def test_a_finished_stream_gives_its_connection_back_for_the_next_request() -> None:
    clients: list[tuple[str, int]] = []
    with serve_app(_sse_member(clients), ready_path="/health") as base:
        member = Member(MemberSettings(name="m", base_url=base + "/v1", model="m"), PS)
        try:
            for _ in range(3):
                assert (await collect(member.stream(REQ))).text == "Hi"
        finally:
            await member.aclose()
    assert len(clients) == 3 and len(set(clients)) == 1  # one connection, kept alive
