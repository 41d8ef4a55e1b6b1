"""OpenAI's Responses API request (``POST /v1/responses``), read as the chat completion it asks for.

Its messages, sampling, output format and tools become a chat body's fields
(:meth:`ResponsesBody.chat_fields`), which the chat schema validates: one set of rules for both
APIs, and an answer cached for one serves the other. Conversations, background jobs and
``item_reference`` items are refused with 400 rather than answered without their context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator

from .schemas import MAX_TOKENS_LIMIT
from .tools import FunctionDef, new_id

# ``include`` asks for log probabilities of the output text with this entry.
LOGPROBS_INCLUDE = "message.output_text.logprobs"


class ContentPart(BaseModel):
    """A message's text part: ``input_text`` (user, system) or ``output_text`` (an earlier answer)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["input_text", "output_text"]
    text: str


class MessageItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | Annotated[list[ContentPart], Field(max_length=256)]


class FunctionCallItem(BaseModel):
    """A call the model made earlier (sent back with its output)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["function_call"]
    call_id: str = Field(max_length=256)
    name: str = Field(max_length=64)
    arguments: str


class FunctionCallOutputItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["function_call_output"]
    call_id: str = Field(max_length=256)
    output: str | list[ContentPart]


def _item_type(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "message")  # OpenAI's easy input message has no ``type``
        return kind if kind in _ITEMS else None
    return getattr(value, "type", None)


_ITEMS = {"message", "function_call", "function_call_output"}

InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")],
    Discriminator(
        _item_type,
        custom_error_type="invalid_item",
        custom_error_message="input items are messages, function_call or function_call_output "
        "(this node keeps no stored items, images or files)",
    ),
]


class TextFormat(BaseModel):
    """``text.format``: free text, any JSON object, or JSON matching a named schema."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    description: str | None = None
    body: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None

    def response_format(self) -> dict[str, Any] | None:
        """The chat API's ``response_format`` for this format (None for free text)."""
        if self.type == "text":
            return None
        if self.type == "json_object":
            return {"type": "json_object"}
        spec: dict[str, Any] = {"name": self.name, "schema": self.body if self.body is not None else {}}
        spec.update(self.model_dump(include={"description", "strict"}, exclude_none=True))
        return {"type": "json_schema", "json_schema": spec}

    def echo(self) -> dict[str, Any]:
        """The format as the response object repeats it."""
        return self.model_dump(by_alias=True, exclude_none=True)


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    format: TextFormat = Field(default_factory=lambda: TextFormat(type="text"))


class FunctionTool(FunctionDef):
    """``tools`` entry: the Responses API's function tool (the chat API's function, flat)."""

    type: Literal["function"]


class FunctionChoice(BaseModel):
    type: Literal["function"]
    name: str


class ResponsesBody(BaseModel):
    """``POST /v1/responses``: fields OpenAI defines that the node does not use are accepted and
    ignored; those whose meaning it cannot honour are refused."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    input: str | Annotated[list[InputItem], Field(min_length=1)]
    instructions: str | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    stream: bool = False
    text: TextConfig | None = None
    tools: Annotated[list[FunctionTool], Field(max_length=128)] | None = None
    tool_choice: Literal["none", "auto", "required"] | FunctionChoice | None = None
    parallel_tool_calls: bool | None = None  # one call per answer either way
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    include: list[str] | None = None
    store: bool | None = None  # None or true: stored (OpenAI's default); false: not kept
    metadata: dict[str, str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    previous_response_id: str | None = Field(None, max_length=256)
    conversation: str | dict[str, Any] | None = None
    background: bool | None = None
    user: str | None = None

    @field_validator("conversation", "background")
    @classmethod
    def _stateless(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and value is not False:
            raise ValueError(
                f"{info.field_name} is not supported: this node keeps responses (previous_response_id), "
                "not conversations or background jobs"
            )
        return value

    @property
    def format(self) -> TextFormat:
        return self.text.format if self.text is not None else TextFormat(type="text")

    def input_messages(self) -> list[dict[str, Any]]:
        """``input`` as chat messages."""
        return output_messages(self.input_items())

    def input_items(self) -> list[dict[str, Any]]:
        """``input`` as the items ``GET /v1/responses/{id}/input_items`` lists (each with an id)."""
        out: list[dict[str, Any]] = []
        items = [MessageItem(role="user", content=self.input)] if isinstance(self.input, str) else self.input
        for item in items:
            given = (item.model_extra or {}).get("id")
            if isinstance(item, MessageItem):
                kind = "output_text" if item.role == "assistant" else "input_text"
                parts = [{"type": kind, "text": item.content}] if isinstance(item.content, str) else [
                    p.model_dump() for p in item.content
                ]
                if item.role == "assistant":
                    parts = [{"annotations": [], **p} for p in parts]
                out.append({
                    "id": given if isinstance(given, str) else new_id("msg_"), "type": "message", "role": item.role,
                    "status": "completed", "content": parts,
                })
            elif isinstance(item, FunctionCallItem):
                out.append({
                    "id": given or new_id("fc_"), "type": "function_call", "status": "completed",
                    "call_id": item.call_id, "name": item.name, "arguments": item.arguments,
                })
            else:
                output = item.output if isinstance(item.output, str) else "".join(p.text for p in item.output)
                out.append({
                    "id": given or new_id("fco_"), "type": "function_call_output", "status": "completed",
                    "call_id": item.call_id, "output": output,
                })
        return out

    def chat_fields(self, prior: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """The chat completion body this request asks for (validated by the chat schema): its
        messages are ``instructions`` (never carried over from an earlier response, as OpenAI's
        are not), the conversation ``prior`` to this request, then ``input``."""
        system = [{"role": "system", "content": self.instructions}] if self.instructions else []
        messages = [*system, *prior, *self.input_messages()]
        fields: dict[str, Any] = {"model": self.model, "messages": messages, "stream": self.stream}
        for name, value in (
            ("max_tokens", self.max_output_tokens),
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("parallel_tool_calls", self.parallel_tool_calls),
            ("response_format", self.format.response_format()),
        ):
            if value is not None:
                fields[name] = value
        if self.tools:
            fields["tools"] = [
                {"type": "function", "function": t.model_dump(exclude={"type"}, exclude_none=True)} for t in self.tools
            ]
        if isinstance(self.tool_choice, FunctionChoice):
            fields["tool_choice"] = {"type": "function", "function": {"name": self.tool_choice.name}}
        elif self.tool_choice is not None:
            fields["tool_choice"] = self.tool_choice
        if LOGPROBS_INCLUDE in (self.include or ()):
            fields["logprobs"] = True
            fields["top_logprobs"] = self.top_logprobs or 0
        return fields

    def echo(self) -> dict[str, Any]:
        """The request's settings as the response object repeats them."""
        return {
            "instructions": self.instructions,
            "max_output_tokens": self.max_output_tokens,
            "metadata": self.metadata or {},
            "parallel_tool_calls": True if self.parallel_tool_calls is None else self.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": None, "summary": None},
            "store": self.store is not False,
            "temperature": 1.0 if self.temperature is None else self.temperature,
            "text": {"format": self.format.echo()},
            "tool_choice": (
                self.tool_choice.model_dump() if isinstance(self.tool_choice, FunctionChoice)
                else self.tool_choice or "auto"
            ),
            "tools": [t.model_dump(exclude_none=True) for t in self.tools or ()],
            "top_logprobs": self.top_logprobs or 0,
            "top_p": 1.0 if self.top_p is None else self.top_p,
            "truncation": self.truncation or "disabled",
            "user": self.user,
        }


def output_messages(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's ``output`` items (or its input items) as the chat messages a later request
    continues from: a call as the assistant's ``tool_calls``, its output as a ``tool`` message."""
    out: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") == "function_call":
            fn = {"name": item["name"], "arguments": item["arguments"]}
            call = {"id": item["call_id"], "type": "function", "function": fn}
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item.get("type") == "function_call_output":
            out.append({"role": "tool", "content": item["output"], "tool_call_id": item["call_id"]})
        elif item.get("type") == "message":
            text = "".join(p.get("text", "") for p in item.get("content", ()))
            out.append({"role": item.get("role", "assistant"), "content": text})
    return out
