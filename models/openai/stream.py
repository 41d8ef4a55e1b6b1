"""OpenAI response bodies: a whole completion, and a stream's SSE ``data:`` events."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from ..generation import GenerationRequest, TokenLogprob, Usage, Writer
from .logprobs import text_block, token_entries
from .schemas import ChatBody, CompletionBody
from .tools import ReplyStream, ToolUse, new_id

Kind = Literal["chat", "text"]
# One choice of a whole answer: text, finish reason, log probabilities and (optionally) the stop word.
Answer = tuple[str, str, Sequence[TokenLogprob]] | tuple[str, str, Sequence[TokenLogprob], str | None]

DONE = b"data: [DONE]\n\n"


def error_body(message: str, err_type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


class ChunkWriter(Writer):
    """One response in OpenAI's shape: its stream events, or the whole body when not streamed.

    A chat stream opens with the assistant's role and empty content, as OpenAI and vLLM do; with
    ``include_usage`` every chunk carries ``usage: null`` and one more event before ``[DONE]``
    carries the counts. With ``n`` choices each event names its choice's ``index``; a choice's
    own finish goes out when it ends, the usage and ``[DONE]`` once the last has.
    """

    @classmethod
    def for_body(cls, body: ChatBody | CompletionBody, gen: GenerationRequest) -> ChunkWriter:
        """The writer of ``/v1/chat/completions`` (a chat body) and ``/v1/completions``, for the
        request ``gen`` that ``body`` became."""
        call = body.tool_use() if isinstance(body, ChatBody) else None
        kind: Kind = "chat" if isinstance(body, ChatBody) else "text"
        logprobs = gen.params.logprobs is not None
        return cls(kind, gen.model, include_usage=body.include_usage, call=call, logprobs=logprobs)

    def __init__(
        self,
        kind: Kind,
        model: str,
        *,
        include_usage: bool = False,
        call: ToolUse | None = None,
        logprobs: bool = False,
    ) -> None:
        self.kind = kind
        self.model = model
        self.include_usage = include_usage
        self.rid = new_id("chatcmpl-" if kind == "chat" else "cmpl-")
        self.created = int(time.time())
        # Tools: the generated text is a call's JSON, sent as ``tool_calls`` (or, with
        # ``"auto"``, perhaps the envelope of a text reply).
        self.call = call if kind == "chat" else None
        self._streamed: dict[int, list[str]] = {}  # ``"required"``: a call is sent whole, once it parses
        self._replies: dict[int, ReplyStream] = {}  # ``"auto"``: each choice's answer so far
        self.logprobs = logprobs and self.call is None
        self._offset: dict[int, int] = {}  # characters of a text completion sent so far (its ``text_offset``)

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
            body["usage"] = usage.openai() if usage is not None else None
        return sse(body)

    def _block(self, text: str, entries: Sequence[TokenLogprob], index: int) -> dict[str, Any] | None:
        if not self.logprobs or (not text and not entries):
            return None
        if self.kind == "chat":
            return {"content": token_entries(entries), "refusal": None}
        offset = self._offset.get(index, 0)
        self._offset[index] = offset + len(text)
        return text_block(entries, offset)

    def _choice(
        self, text: str, finish_reason: str | None, role: bool = False, logprobs: Sequence[TokenLogprob] = (),
        index: int = 0,
    ) -> dict[str, Any]:
        block = self._block(text, logprobs, index)
        if self.kind == "chat":
            delta: dict[str, Any] = {"role": "assistant", "content": text} if role else {"content": text}
            if finish_reason is not None and not text:
                delta = {}
            return {"index": index, "delta": delta, "logprobs": block, "finish_reason": finish_reason}
        return {"index": index, "text": text, "logprobs": block, "finish_reason": finish_reason}

    def _call_delta(self, delta: dict[str, Any], index: int) -> bytes:
        return self._event([{"index": index, "delta": delta, "logprobs": None, "finish_reason": None}])

    def opening(self, n: int = 1) -> bytes:
        """The role event a chat stream starts with, one per choice (nothing for a text
        completion); a named function's call opens there too, its arguments following as they
        are generated."""
        if self.kind != "chat":
            return b""
        out = b""
        for index in range(n):
            if self.call is not None and not self.call.auto:
                delta: dict[str, Any] = {"role": "assistant", "content": None}
                if self.call.named is not None:
                    first = self.call.calls("")[0]  # type: ignore[index]
                    delta["tool_calls"] = [{"index": 0, **first}]
                out += self._call_delta(delta, index)
            else:
                out += self._event([self._choice("", None, role=True, index=index)])
        return out

    def text(self, text: str, logprobs: Sequence[TokenLogprob] = (), index: int = 0) -> bytes:
        if self.call is not None and self.call.auto:
            reply = self._replies.setdefault(index, ReplyStream()).feed(text)
            return self._event([self._choice(reply, None, index=index)]) if reply else b""
        if self.call is not None:
            if self.call.named is None:
                self._streamed.setdefault(index, []).append(text)
                return b""
            return self._call_delta({"tool_calls": [{"index": 0, "function": {"arguments": text}}]}, index)
        return self._event([self._choice(text, None, logprobs=logprobs, index=index)])

    def finish(
        self, finish_reason: str, usage: Usage, index: int = 0, last: bool = True, stop_word: str | None = None
    ) -> bytes:
        out = b""
        if self.call is not None:
            reply = self._replies.pop(index, None)  # "auto": the answer so far
            text = reply.text if reply is not None else "".join(self._streamed.pop(index, ()))
            calls = self.call.calls(text) if self.call.named is None else None
            if calls is not None:
                out += self._call_delta({"tool_calls": [{"index": 0, **calls[0]}]}, index)
            # What is left of an "auto" reply; a call cut by max_tokens before it was whole: its text
            # is all there is.
            elif rest := reply.rest(self.call) if reply is not None else text:
                out += self._call_delta({"content": rest}, index)
            finish_reason = _call_finish(finish_reason, self.call.named is not None or calls is not None)
        out += self._event([_stop_reason(self._choice("", finish_reason, index=index), stop_word)])
        if not last:
            return out
        if self.include_usage:
            out += self._event([], usage)
        return out + DONE

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        return sse(error_body(message, err_type, None, code)) + DONE

    def whole(
        self, text: str, finish_reason: str, usage: Usage, logprobs: Sequence[TokenLogprob] = (),
        stop_word: str | None = None,
    ) -> dict[str, Any]:
        return self.whole_choices([(text, finish_reason, logprobs, stop_word)], usage)

    def whole_choices(
        self, answers: Sequence[Answer], usage: Usage
    ) -> dict[str, Any]:
        """The non-streamed body of ``n`` choices: (text, finish reason, log probabilities[, stop word]) each."""
        return {
            "id": self.rid,
            "object": "chat.completion" if self.kind == "chat" else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [self._whole_choice(i, *answer) for i, answer in enumerate(answers)],
            "usage": usage.openai(),
            "system_fingerprint": None,
        }

    def _whole_choice(
        self, index: int, text: str, finish_reason: str, logprobs: Sequence[TokenLogprob],
        stop_word: str | None = None,
    ) -> dict[str, Any]:
        if self.kind != "chat":
            return _stop_reason(self._choice(text, finish_reason, logprobs=logprobs, index=index), stop_word)
        block = self._block(text, logprobs, index)
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if self.call is not None:
            calls = self.call.calls(text)
            if calls is not None:
                message.update(content=None, tool_calls=calls)
            elif self.call.auto:
                message["content"] = self.call.reply(text)
            # else a forced call cut by max_tokens: the text is all there is
            finish_reason = _call_finish(finish_reason, calls is not None)
        return _stop_reason({"index": index, "message": message, "logprobs": block, "finish_reason": finish_reason}, stop_word)


def _stop_reason(choice: dict[str, Any], stop_word: str | None) -> dict[str, Any]:
    """vLLM's ``stop_reason`` on a finished choice ended by a stop sequence (absent otherwise, as
    in OpenAI's answers); a member's stop word reaches the node's llama.cpp API this way."""
    if stop_word is not None and choice.get("finish_reason") == "stop":
        choice["stop_reason"] = stop_word
    return choice


def _call_finish(finish_reason: str, called: bool) -> str:
    """A call that was written out whole ends as ``tool_calls``, as OpenAI's do."""
    return "tool_calls" if called and finish_reason == "stop" else finish_reason
