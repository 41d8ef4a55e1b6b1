"""Function calling: how an answer uses ``tools``, the JSON Schema it is generated under, and how
the generated text becomes ``tool_calls`` (whole, streamed, or cut short).

``tool_choice`` a named function: the answer is that function's arguments, a JSON object of its
``parameters``. ``"required"``: ``{"name": ..., "arguments": {...}}``, one of the tools by schema.
``"auto"`` (OpenAI's default when tools are given): the model chooses, as llama.cpp's server lets
a model without a tool-calling template choose (its generic format): the answer is either
``{"tool_call": {"name": ..., "arguments": {...}}}`` or ``{"response": "the reply"}``, and the
reply is streamed as text as soon as the envelope says it is one. ``"none"``: plain text. The
functions reach the model as a system message (these small models have no tool-calling
template); the grammar makes every call parse and match its function.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import from_json

_NAME = r"^[A-Za-z0-9_-]{1,64}$"
_ANY_OBJECT: dict[str, Any] = {"type": "object"}
_TEXT: dict[str, Any] = {"type": "string"}


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(pattern=_NAME)
    description: str | None = Field(None, max_length=8_000)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(BaseModel):
    """One entry of ``tools``."""

    type: Literal["function"]
    function: FunctionDef


class FunctionName(BaseModel):
    name: str = Field(pattern=_NAME)


class NamedToolChoice(BaseModel):
    """``tool_choice: {"type": "function", "function": {"name": ...}}``."""

    type: Literal["function"]
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _partial(text: str) -> Any:
    """``text`` read as the start of a JSON value (an unfinished string kept as far as it goes)."""
    try:
        return from_json(text, allow_partial="trailing-strings")
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ToolUse:
    """How an answer uses its tools: it must call the one ``named``, must call one of them
    (``"required"``), or may call one (``auto``) and otherwise replies in text, under
    ``reply_schema`` when ``response_format`` asks for JSON."""

    tools: tuple[FunctionDef, ...]
    named: str | None = None
    auto: bool = False
    reply_schema: str | None = None

    @staticmethod
    def _parameters(fn: FunctionDef) -> dict[str, Any]:
        return fn.parameters if fn.parameters is not None else _ANY_OBJECT

    def _calls_schema(self) -> dict[str, Any]:
        calls = [
            {
                "type": "object",
                "properties": {"name": {"const": fn.name}, "arguments": self._parameters(fn)},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for fn in self.tools
        ]
        return calls[0] if len(calls) == 1 else {"anyOf": calls}

    def schema(self) -> str:
        """The JSON Schema the answer is generated under (compact JSON text)."""
        if self.named is not None:
            return _compact(self._parameters(self._tool(self.named)))
        if not self.auto:
            return _compact(self._calls_schema())
        reply = json.loads(self.reply_schema) if self.reply_schema is not None else _TEXT
        return _compact({"anyOf": [
            {"type": "object", "properties": {"tool_call": self._calls_schema()}, "required": ["tool_call"], "additionalProperties": False},
            {"type": "object", "properties": {"response": reply}, "required": ["response"], "additionalProperties": False},
        ]})

    def instruction(self) -> str:
        """What the model is told (as a system message) about the call it must or may write."""
        if self.named is not None:
            fn = self._tool(self.named)
            about = f": {fn.description}" if fn.description else ""
            return (
                f"Call the function {fn.name}{about}. Reply with only its arguments, a JSON object "
                f"matching this JSON Schema: {_compact(self._parameters(fn))}"
            )
        lines = "\n".join(
            f"- {fn.name}" + (f": {fn.description}" if fn.description else "")
            + f" (arguments: a JSON object matching {_compact(self._parameters(fn))})"
            for fn in self.tools
        )
        if not self.auto:
            return (
                f"Call one of these functions:\n{lines}\n"
                'Reply with only a JSON object: {"name": <the function>, "arguments": <its arguments>}.'
            )
        return (
            f"You can call these functions:\n{lines}\n"
            'If the request needs one of them, reply {"tool_call": {"name": <the function>, "arguments": '
            '<its arguments>}}; otherwise answer the user with {"response": <your reply>}.'
        )

    def _tool(self, name: str) -> FunctionDef:
        return next(fn for fn in self.tools if fn.name == name)

    def calls(self, text: str) -> list[dict[str, Any]] | None:
        """The answer as OpenAI's ``tool_calls``; None when it is no call (an ``auto`` reply) or
        not a whole one (cut by ``max_tokens``). A named call's arguments are passed on as written."""
        if self.named is not None:
            return [_call(self.named, text)]
        try:
            value = json.loads(text)
            if self.auto:
                value = value["tool_call"]
            name, arguments = value["name"], value["arguments"]
        except (ValueError, KeyError, TypeError):
            return None
        return [_call(str(name), _compact(arguments))]

    def reply(self, text: str) -> str:
        """An ``auto`` answer that is no call, as the text the client gets: the reply inside the
        envelope (as far as it goes, when cut short); else the text as generated (cut before the
        envelope said what it is, or an answer from before tools were read this way)."""
        value = _partial(text)
        if isinstance(value, dict) and "response" in value:
            reply = value["response"]
            return reply if isinstance(reply, str) else _compact(reply)
        return text


class ReplyStream:
    """An ``auto`` answer as it is generated: what of its reply can be sent now.

    The text is kept whole (a call is read once it is complete); a text reply is sent as it
    grows. A JSON ``reply_schema`` reply is sent at the end (a value in the making is not text
    that only grows)."""

    def __init__(self) -> None:
        self.text = ""
        self._sent = 0  # characters of the reply sent

    def feed(self, piece: str) -> str:
        """Take the next piece; returns the reply's characters that can be sent now."""
        self.text += piece
        value = _partial(self.text)
        if not (isinstance(value, dict) and isinstance(value.get("response"), str)):
            return ""
        reply: str = value["response"]
        if reply and "\ud800" <= reply[-1] <= "\udbff":
            reply = reply[:-1]  # half a surrogate pair (a "\\ud83d" escape): its other half decides
        new = reply[self._sent :]
        self._sent = max(self._sent, len(reply))
        return new

    def rest(self, use: ToolUse) -> str:
        """What is left to send of a reply at the end (all of it, for one not sent as it grew)."""
        return use.reply(self.text)[self._sent :]


def new_id(prefix: str) -> str:
    """A fresh id of an answer, an item or a call: ``prefix`` and 24 hex digits, as OpenAI's look."""
    return prefix + uuid.uuid4().hex[:24]


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": new_id("call_"), "type": "function", "function": {"name": name, "arguments": arguments}}
