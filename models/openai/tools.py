"""Function calling when the client forces a call (``tool_choice`` ``"required"`` or a named
function): the call is generated under a JSON Schema grammar, so it always parses and matches.

A named function's arguments are generated as a JSON object of its ``parameters``; with
``"required"`` the answer is ``{"name": ..., "arguments": {...}}``, one of the tools by schema.
The function's description and parameters reach the model as a system message (these small
models have no tool-calling template). ``"auto"`` and ``"none"`` answer in text: the model chose
not to call, which ``"auto"`` allows.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_NAME = r"^[A-Za-z0-9_-]{1,64}$"
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


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


@dataclass(frozen=True, slots=True)
class ForcedCall:
    """A forced function call: the tools it may be, and the one named (None: any of them)."""

    tools: tuple[FunctionDef, ...]
    named: str | None = None

    @staticmethod
    def _parameters(fn: FunctionDef) -> dict[str, Any]:
        return fn.parameters if fn.parameters is not None else _ANY_OBJECT

    def schema(self) -> str:
        """The JSON Schema the answer is generated under (compact JSON text)."""
        if self.named is not None:
            return _compact(self._parameters(self._tool(self.named)))
        calls = [
            {
                "type": "object",
                "properties": {"name": {"const": fn.name}, "arguments": self._parameters(fn)},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for fn in self.tools
        ]
        return _compact(calls[0] if len(calls) == 1 else {"anyOf": calls})

    def instruction(self) -> str:
        """What the model is told (as a system message) about the call it must write."""
        if self.named is not None:
            fn = self._tool(self.named)
            about = f": {fn.description}" if fn.description else ""
            return (
                f"Call the function {fn.name}{about}. Reply with only its arguments, a JSON object "
                f"matching this JSON Schema: {_compact(self._parameters(fn))}"
            )
        lines = [
            f"- {fn.name}" + (f": {fn.description}" if fn.description else "")
            + f" (arguments: a JSON object matching {_compact(self._parameters(fn))})"
            for fn in self.tools
        ]
        return (
            "Call one of these functions:\n" + "\n".join(lines)
            + '\nReply with only a JSON object: {"name": <the function>, "arguments": <its arguments>}.'
        )

    def _tool(self, name: str) -> FunctionDef:
        return next(fn for fn in self.tools if fn.name == name)

    def calls(self, text: str) -> list[dict[str, Any]] | None:
        """The answer as OpenAI's ``tool_calls`` (None when it is not a whole call: cut by
        ``max_tokens``). A named call's arguments are passed on as written."""
        if self.named is not None:
            return [_call(self.named, text)]
        try:
            value = json.loads(text)
            name, arguments = value["name"], value["arguments"]
        except (ValueError, KeyError, TypeError):
            return None
        return [_call(str(name), _compact(arguments))]


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": {"name": name, "arguments": arguments}}


def forced_call(tools: list[ToolDef] | None, choice: ToolChoice | None) -> ForcedCall | None:
    """The call ``tool_choice`` forces, if it forces one (callers validated the pair)."""
    if not tools or choice in (None, "none", "auto"):
        return None
    functions = tuple(t.function for t in tools)
    if isinstance(choice, NamedToolChoice):
        return ForcedCall(functions, choice.function.name)
    return ForcedCall(functions)
