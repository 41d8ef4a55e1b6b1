"""OpenAI response bodies: a whole completion, and a stream's SSE ``data:`` events."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from ..generation import Usage
from .errors import error_body

Kind = Literal["chat", "text"]

DONE = b"data: [DONE]\n\n"


def new_id(kind: Kind) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]


def usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


class ChunkWriter:
    """One response in OpenAI's shape: its stream events, or the whole body when not streamed.

    A chat stream opens with the assistant's role and empty content, as OpenAI and vLLM do; with
    ``include_usage`` every chunk carries ``usage: null`` and one more event before ``[DONE]``
    carries the counts.
    """

    def __init__(self, kind: Kind, model: str, *, include_usage: bool = False, rid: str | None = None) -> None:
        self.kind = kind
        self.model = model
        self.include_usage = include_usage
        self.rid = rid or new_id(kind)
        self.created = int(time.time())

    def _event(self, choices: list[dict[str, Any]], usage: Usage | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": self.rid,
            "object": "chat.completion.chunk" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            body["usage"] = usage_dict(usage) if usage is not None else None
        return sse(body)

    def _choice(self, text: str, finish_reason: str | None, role: bool = False) -> dict[str, Any]:
        if self.kind == "chat":
            delta: dict[str, Any] = {"role": "assistant", "content": text} if role else {"content": text}
            if finish_reason is not None and not text:
                delta = {}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}

    def opening(self) -> bytes:
        """The role event a chat stream starts with (nothing for a text completion)."""
        return self._event([self._choice("", None, role=True)]) if self.kind == "chat" else b""

    def text(self, text: str) -> bytes:
        return self._event([self._choice(text, None)])

    def finish(self, finish_reason: str, usage: Usage) -> bytes:
        out = self._event([self._choice("", finish_reason)])
        if self.include_usage:
            out += self._event([], usage)
        return out + DONE

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        """End a stream whose headers are already sent: an error event, then ``[DONE]``."""
        return sse(error_body(message, err_type, None, code)) + DONE

    def whole(self, text: str, finish_reason: str, usage: Usage) -> dict[str, Any]:
        """The non-streamed response body."""
        if self.kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return {
            "id": self.rid,
            "object": "chat.completion" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage_dict(usage),
            "system_fingerprint": None,
        }
