"""Ollama's answers: a stream of JSON lines (``application/x-ndjson``) or one JSON object.

Each line of ``/api/chat`` carries a piece of the assistant's ``message``, of ``/api/generate``
a piece of ``response``; the last has ``done: true``, ``done_reason`` and the counts and
timings (nanoseconds). An error after the first line is a line ``{"error": ...}``, which
Ollama's clients raise. Given ``tools``, the model may call one: the call comes whole, as
``message.tool_calls`` with its arguments as an object, in the line before the last.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from ..generation import TokenLogprob, Usage, Writer
from ..openai.logprobs import token_entries
from ..openai.tools import ReplyStream, ToolUse

Endpoint = Literal["chat", "generate"]
MEDIA_TYPE = "application/x-ndjson"


def error_body(message: str) -> dict[str, str]:
    """Ollama's error body (its clients read ``error`` as the message)."""
    return {"error": message}


def line(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode() + b"\n"


class NdjsonWriter(Writer):
    """One answer in Ollama's shape."""

    media_type = MEDIA_TYPE

    def __init__(self, endpoint: Endpoint, model: str, *, logprobs: bool = False, tools: ToolUse | None = None) -> None:
        self.endpoint = endpoint
        self.model = model
        self.tools = tools if endpoint == "chat" and tools is not None and tools.auto else None
        self.logprobs = logprobs and self.tools is None
        self._reply = ReplyStream()
        self._started = time.perf_counter_ns()
        self._first: int | None = None  # when the first text came: the prompt was read by then

    def _piece(self, text: str, entries: Sequence[TokenLogprob] = ()) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")  # as Ollama writes it
        body: dict[str, Any] = {"model": self.model, "created_at": now}
        if self.endpoint == "chat":
            body["message"] = {"role": "assistant", "content": text}
        else:
            body["response"] = text
        if self.logprobs and entries:
            body["logprobs"] = token_entries(entries)
        return body

    def _done(self, body: dict[str, Any], finish_reason: str, usage: Usage) -> dict[str, Any]:
        now = time.perf_counter_ns()
        first = self._first if self._first is not None else now
        body.update(
            done=True,
            done_reason=finish_reason if finish_reason in ("stop", "length") else "stop",
            total_duration=now - self._started,
            load_duration=0,  # the node's models are loaded at start
            prompt_eval_count=usage.prompt_tokens,
            prompt_eval_duration=first - self._started,
            eval_count=usage.completion_tokens,
            eval_duration=now - first,
        )
        return body

    def _called(self, text: str) -> dict[str, Any] | None:
        """The message of an answer that is a whole call, else None."""
        calls = self.tools.calls(text) if self.tools is not None else None
        if calls is None:
            return None
        fn = calls[0]["function"]
        call = {"function": {"name": fn["name"], "arguments": json.loads(fn["arguments"])}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}

    def text(self, text: str, logprobs: Sequence[TokenLogprob] = (), index: int = 0) -> bytes:
        if self._first is None:
            self._first = time.perf_counter_ns()
        if self.tools is not None:
            text = self._reply.feed(text)
            if not text:
                return b""
        return line({**self._piece(text, logprobs), "done": False})

    def finish(
        self, finish_reason: str, usage: Usage, index: int = 0, last: bool = True, stop_word: str | None = None
    ) -> bytes:
        out = b""
        if self.tools is not None:
            called = self._called(self._reply.text)
            if called is not None:
                out = line({**self._piece(""), "message": called, "done": False})
            elif rest := self._reply.rest(self.tools):
                out = line({**self._piece(rest), "done": False})
        return out + line(self._done(self._piece(""), finish_reason, usage))

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        return line(error_body(message))

    def whole(
        self, text: str, finish_reason: str, usage: Usage, logprobs: Sequence[TokenLogprob] = (),
        stop_word: str | None = None,
    ) -> dict[str, Any]:
        if self._first is None:
            self._first = self._started  # a whole answer's split is not seen: all of it counts as eval
        if self.tools is not None:
            called = self._called(text)
            if called is not None:
                return self._done({**self._piece(""), "message": called}, finish_reason, usage)
            text = self.tools.reply(text)
        return self._done(self._piece(text, logprobs), finish_reason, usage)


def loaded(endpoint: Endpoint, model: str, unload: bool = False) -> dict[str, Any]:
    """The answer to an empty prompt or conversation: Ollama's way to load (or unload) a model."""
    empty = NdjsonWriter(endpoint, model)._piece("")
    return {**empty, "done": True, "done_reason": "unload" if unload else "load"}
