"""OpenAI wire format: response bodies, stream chunks and error bodies."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from models import Usage

Kind = Literal["chat", "text"]


def new_id(kind: Kind) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]


def usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def completion_body(
    kind: Kind, rid: str, model: str, text: str, finish_reason: str, usage: Usage, created: int | None = None
) -> dict[str, Any]:
    created = created or int(time.time())
    if kind == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        obj = "text_completion"
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_dict(usage),
        "system_fingerprint": None,
    }


class ChunkWriter:
    """Serialises one stream's chunks as SSE ``data:`` lines."""

    def __init__(self, kind: Kind, rid: str, model: str, include_usage: bool) -> None:
        self.kind = kind
        self.rid = rid
        self.model = model
        self.include_usage = include_usage
        self.created = int(time.time())
        self._first = True

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
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    def _choice(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        if self.kind == "chat":
            delta: dict[str, Any] = {"content": text} if text or finish_reason is None else {}
            if self._first:
                delta = {"role": "assistant", "content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}

    def text(self, text: str) -> bytes:
        out = self._event([self._choice(text, None)])
        self._first = False
        return out

    def finish(self, finish_reason: str, usage: Usage) -> bytes:
        out = self._event([self._choice("", finish_reason)])
        self._first = False
        if self.include_usage:
            out += self._event([], usage)
        return out + b"data: [DONE]\n\n"

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        body = error_body(message, err_type, None, code)
        return b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]\n\n"


def error_body(message: str, err_type: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}
