"""The Responses API's answer: the response object, and its stream of typed server-sent events.

A stream goes ``response.created``, ``response.in_progress``, the output item and its content
part opened, text deltas, each closed again, then ``response.completed`` (``response.incomplete``
when ``max_output_tokens`` cut it); every event carries its ``sequence_number``. There is no
``[DONE]``: the terminal event ends the stream, as OpenAI's does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..generation import TokenLogprob, Usage, Writer
from .logprobs import token_entries
from .tools import ReplyStream, ToolUse, new_id


class ResponseWriter(Writer):
    """One response in the Responses API's shape.

    ``settings`` are the request's own (``instructions``, ``text``, ``tools`` ...), repeated in
    the response object as OpenAI does. A function call is answered as a ``function_call``
    output item; a named one streams its arguments as they are generated. With ``"auto"`` the
    message item opens once the answer is known to be a text reply.
    """

    def __init__(
        self, model: str, settings: dict[str, Any], *, call: ToolUse | None = None, logprobs: bool = False
    ) -> None:
        self.model = model
        self.settings = settings
        self.call = call
        self.logprobs = logprobs and call is None
        self.rid = new_id("resp_")
        self.item_id = new_id("msg_")
        self.created = int(time.time())
        self._seq = 0
        self._text: list[str] = []
        self._entries: list[TokenLogprob] = []
        self._call_id = new_id("call_")
        self._call_item_id = "fc_" + self.item_id[4:]
        self._reply = ReplyStream() if call is not None and call.auto else None
        # A named function's call is streamed as its arguments are generated.
        self._named = call.named if call is not None else None
        self._opened = False  # the message item (``"auto"`` opens it late, or never)
        self.final: dict[str, Any] | None = None  # the finished response object, once there is one

    # -- the response object and its items --------------------------------------------------

    def _response(self, status: str, output: list[dict[str, Any]], usage: Usage | None = None) -> dict[str, Any]:
        return {
            "id": self.rid,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "model": self.model,
            "output": output,
            "usage": usage.responses() if usage is not None else None,
            **self.settings,
        }

    def _logprobs(self, entries: Sequence[TokenLogprob]) -> list[dict[str, Any]]:
        return token_entries(entries) if self.logprobs else []

    def _part(self, text: str, entries: Sequence[TokenLogprob] = ()) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": self._logprobs(entries)}

    def _message(self, status: str, text: str | None, entries: Sequence[TokenLogprob] = ()) -> dict[str, Any]:
        content = [] if text is None else [self._part(text, entries)]
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant", "content": content}

    def _function_call(self, status: str, name: str, arguments: str) -> dict[str, Any]:
        return {
            "id": self._call_item_id, "type": "function_call", "status": status,
            "call_id": self._call_id, "name": name, "arguments": arguments,
        }

    def _output(self, text: str, status: str, entries: Sequence[TokenLogprob] = ()) -> list[dict[str, Any]]:
        """The answer's output items: the call when it is a whole one, else the text (an
        ``"auto"`` reply's own; a forced call cut by max_output_tokens: the text is all there is)."""
        if self.call is not None:
            calls = self.call.calls(text)
            if calls is not None:
                fn = calls[0]["function"]
                return [self._function_call(status, fn["name"], fn["arguments"])]
            if self.call.auto:
                return [self._message(status, self.call.reply(text), entries)]
        return [self._message(status, text, entries)]

    def whole(
        self, text: str, finish_reason: str, usage: Usage, logprobs: Sequence[TokenLogprob] = (),
        stop_word: str | None = None,
    ) -> dict[str, Any]:
        status = _status(finish_reason)
        self.final = self._response(status, self._output(text, status, logprobs), usage)
        return self.final

    # -- the stream ----------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> bytes:
        body = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return f"event: {kind}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    def opening(self, n: int = 1) -> bytes:
        """The response's opening events (the Responses API has one output, ``n`` is 1)."""
        out = self._event("response.created", response=self._response("in_progress", []))
        out += self._event("response.in_progress", response=self._response("in_progress", []))
        if self._named is not None:
            item = self._function_call("in_progress", self._named, "")
            return out + self._event("response.output_item.added", output_index=0, item=item)
        if self.call is not None:  # "required": which function is known once the call is whole
            return out
        return out + self._open_message()

    def _open_message(self) -> bytes:
        self._opened = True
        out = self._event("response.output_item.added", output_index=0, item=self._message("in_progress", None))
        return out + self._event(
            "response.content_part.added", item_id=self.item_id, output_index=0, content_index=0, part=self._part("")
        )

    def _delta(self, text: str, logprobs: Sequence[TokenLogprob] = ()) -> bytes:
        return self._event(
            "response.output_text.delta", item_id=self.item_id, output_index=0, content_index=0,
            delta=text, logprobs=self._logprobs(logprobs),
        )

    def text(self, text: str, logprobs: Sequence[TokenLogprob] = (), index: int = 0) -> bytes:
        self._text.append(text)
        self._entries.extend(logprobs)
        if self._reply is not None:
            reply = self._reply.feed(text)
            if not reply:
                return b""
            return (b"" if self._opened else self._open_message()) + self._delta(reply)
        if self._named is not None:
            return self._event("response.function_call_arguments.delta", item_id=self._call_item_id, output_index=0, delta=text)
        if self.call is not None:  # "required": which function is known once the call is whole
            return b""
        return self._delta(text, logprobs)

    def finish(
        self, finish_reason: str, usage: Usage, index: int = 0, last: bool = True, stop_word: str | None = None
    ) -> bytes:
        status = _status(finish_reason)
        text = "".join(self._text)
        output = self._output(text, status, self._entries)
        item = output[0]
        out = b""
        if item["type"] == "function_call":
            if self._named is None:
                out += self._event("response.output_item.added", output_index=0, item={**item, "status": "in_progress", "arguments": ""})
                out += self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=0, delta=item["arguments"])
            out += self._event(
                "response.function_call_arguments.done", item_id=item["id"], output_index=0,
                name=item["name"], arguments=item["arguments"],
            )
        else:
            part = item["content"][0]
            rest = self._reply.rest(self.call) if self._reply is not None and self.call is not None else part["text"]
            if not self._opened:  # a call's text (cut short), or an "auto" reply not yet sent
                out += self._open_message() + self._delta(rest)
            elif self._reply is not None and rest:
                out += self._delta(rest)
            out += self._event(
                "response.output_text.done", item_id=self.item_id, output_index=0, content_index=0,
                text=part["text"], logprobs=part["logprobs"],
            )
            out += self._event("response.content_part.done", item_id=self.item_id, output_index=0, content_index=0, part=part)
        out += self._event("response.output_item.done", output_index=0, item=item)
        terminal = "response.completed" if status == "completed" else "response.incomplete"
        self.final = self._response(status, output, usage)
        return out + self._event(terminal, response=self.final)

    def error(self, message: str, err_type: str = "server_error", code: str | None = None) -> bytes:
        out = self._event("error", code=code or err_type, message=message, param=None)
        failed = self._response("failed", [])
        failed["error"] = {"code": code or err_type, "message": message}
        return out + self._event("response.failed", response=failed)


def _status(finish_reason: str) -> str:
    return "incomplete" if finish_reason == "length" else "completed"
