"""Shared pieces of the hybrid-node tests: a scripted member with an access log, and a node on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from edgeroute.app import create_app
from router import load_settings
from tests.cloud.cloud_servers import ScriptedServer, chat_chunk, sse
from loadtest.servers import serve_app, settled

ASK = [{"role": "user", "content": "Explain step by step how a hash map handles collisions, with code."}]


class RecordingServer(ScriptedServer):
    """A scripted member that answers health checks, and keeps an access log of completions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.access_log: list[dict[str, Any]] = []
        self.models = ["scripted"]  # what /v1/models lists: the pool's health check reads it
        self._path = threading.local()
        super().__init__(*args, **kwargs)

    def handle(self, conn: socket.socket) -> None:
        self._path.value = ""
        try:
            self._read_request(conn)
        except OSError:
            return
        path = self._path.value
        if path.endswith("/completions"):
            script, self.script = self.script, [("noop",)]
            try:
                streamed = self.status.startswith("200") and self.content_type == "text/event-stream"
                if streamed and self._path.body.get("stream") is False:
                    self.respond(conn, as_whole(script, chat=path.endswith("/chat/completions")), "application/json")
                else:
                    self.respond(conn, script)
            finally:
                self.script = script
            return
        data = [{"id": m, "object": "model"} for m in self.models]
        body = json.dumps({"status": "ok", "object": "list", "data": data}).encode()
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
        try:
            conn.sendall(head.encode() + body)
            conn.close()
        except OSError:
            pass

    def _read_request(self, conn: socket.socket) -> tuple[str, bytes]:
        path, body = super()._read_request(conn)
        self._path.value = path
        if path.endswith("/completions"):
            self._path.body = json.loads(body or b"{}")
            self.access_log.append(self._path.body)
        return path, body


def as_whole(script: list[tuple[object, ...]], *, chat: bool = True) -> list[tuple[object, ...]]:
    """A streamed script told as a server answers a request for the whole answer: one JSON body
    with the deltas' text, the finish_reason and usage. Sleeps stay (the body comes after them); a
    cut cuts before any body (the server died while generating); an event that is not JSON makes
    the body that event, as garbled as it was."""
    out: list[tuple[object, ...]] = []
    text: list[str] = []
    finish: str | None = None
    usage: dict[str, int] | None = None
    for step in script:
        if step[0] != "send":
            out.append(step)
            if step[0] == "cut":
                return out
            continue
        assert isinstance(step[1], bytes)
        for event in step[1].split(b"\n\n"):
            data = event.removeprefix(b"data: ").strip()
            if not data or data == b"[DONE]":
                continue
            try:
                chunk = json.loads(data)
            except ValueError:
                return [*out, ("send", data)]
            if not isinstance(chunk, dict) or "choices" not in chunk:
                return [*out, ("send", data)]
            usage = chunk.get("usage") or usage
            for choice in chunk["choices"]:
                text.append(choice["delta"].get("content") or "")
                finish = choice["finish_reason"] or finish
    answer = {"role": "assistant", "content": "".join(text)}
    choice = {"index": 0, "finish_reason": finish, **({"message": answer} if chat else {"text": answer["content"]})}
    body = {"id": "x", "object": "chat.completion" if chat else "text_completion", "choices": [choice]}
    if usage is not None:
        body["usage"] = usage
    return [*out, ("send", json.dumps(body).encode())]


def good_stream(*pieces: str) -> list[tuple[object, ...]]:
    steps: list[tuple[object, ...]] = [("send", sse(chat_chunk(p))) for p in pieces]
    steps.append(("send", sse(chat_chunk(None, "stop"), "[DONE]")))
    return steps


@contextmanager
def node(tmp_path: Path, members: list[Any], **overrides: Any) -> Iterator[tuple[str, Any]]:
    cloud = {
        "members": [m.model_dump() if hasattr(m, "model_dump") else m for m in members],
        "local_member": False,
        "health_interval_s": 0,
        "stall_timeout_s": 2.0,
        "first_token_timeout_s": 20.0,
        "retries": 0,
        **overrides.pop("cloud", {}),
    }
    overrides.setdefault("cache", {"enabled": False})  # every request here must reach an engine
    settings = load_settings(data_dir=tmp_path / "node", cloud=cloud, **overrides)
    app = create_app(settings)
    with serve_app(app) as base:
        yield base, app


def sse_lines(base: str, body: dict[str, Any], on_chunk: Any = None) -> tuple[httpx.Headers, list[str]]:
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        lines = []
        for line in resp.iter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
                if on_chunk is not None:
                    on_chunk(lines)
        return resp.headers, lines


def text_of(lines: list[str]) -> str:
    out = []
    for line in lines:
        if line == "[DONE]":
            continue
        chunk = json.loads(line)
        assert "error" not in chunk, chunk
        for choice in chunk["choices"]:
            out.append(choice["delta"].get("content") or "")
    return "".join(out)


def decisions(app: Any) -> list[Any]:
    """The node's decision records, newest first, as the dashboard's feed sees them (once no
    API request is in flight: :func:`loadtest.servers.settled`)."""
    return list(settled(app).state.node.telemetry.recent())


def decisions_once(app: Any, n: int = 1, within_s: float = 10.0) -> list[Any]:
    """:func:`decisions` once ``n`` are recorded: a request the client left is recorded when the
    node's cancellation has unwound, which may be after the client and the member saw it end."""
    deadline = time.monotonic() + within_s
    rows = decisions(app)
    while len(rows) < n and time.monotonic() < deadline:
        time.sleep(0.02)
        rows = decisions(app)
    return rows


def kill_after_chunks(proc: Any, n: int) -> tuple[threading.Event, Any]:
    """An ``on_chunk`` callback for :func:`sse_lines` that SIGKILLs ``proc`` once the client has read
    ``n`` chunks that carry text. Counting text, not lines, keeps the kill after real output: a
    server may open its stream with a role-only chunk or empty deltas."""
    killed = threading.Event()
    seen = [0]

    def on_chunk(lines: list[str]) -> None:
        if killed.is_set() or lines[-1] == "[DONE]":
            return
        if text_of(lines[-1:]):
            seen[0] += 1
        if seen[0] >= n:
            killed.set()
            proc.kill()

    return killed, on_chunk


def stream_through_a_kill(base: str, proc: Any, *, after: int = 3) -> list[str]:
    """Stream ASK from the cloud, SIGKILL ``proc`` at chunk ``after``; the client must still see one
    cloud stream ending in exactly one ``[DONE]``. Returns the SSE data lines."""
    killed, on_chunk = kill_after_chunks(proc, after)
    body = {"model": "cloud", "messages": ASK, "stream": True, "max_tokens": 48, "temperature": 0}
    headers, lines = sse_lines(base, body, on_chunk)
    assert killed.is_set(), "the member finished before the kill: the test proves nothing"
    assert headers["x-edgeroute-route"] == "cloud"
    assert lines.count("[DONE]") == 1 and lines[-1] == "[DONE]"
    return lines
