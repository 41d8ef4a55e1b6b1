"""``POST /tokenize`` and ``/detokenize``: the edge model's own token ids, as llama.cpp's server
and vLLM serve them.

A client needs them for ``logit_bias`` (whose keys are the model's token ids) and to count a
prompt's tokens before sending it. Both servers' request shapes are read: llama.cpp's
``content`` (with ``add_special``, ``with_pieces``) and vLLM's ``prompt`` or ``messages`` (a
chat rendered with the model's template and the assistant's turn opened, as a request would be).
Only the edge's tokenizer is on the box: a cloud model's id gets 400.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request
from litestar.datastructures import State
from pydantic import BaseModel, ConfigDict, Field, model_validator

from models import GenerationRequest, SamplingParams
from models.openai import Message

from . import openapi
from .errors import InvalidRequestError
from .limits import check_messages, check_texts
from .node import Node
from .offload import off_loop, prompt_cost

MAX_DETOKENIZE = 1_000_000


class TokenizeBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = Field(None, max_length=256)
    content: str | None = None  # llama.cpp's name
    prompt: str | None = None  # vLLM's
    messages: Annotated[list[Message], Field(min_length=1)] | None = None
    add_special: bool = False  # a BOS of the model's own, when the model adds one
    with_pieces: bool = False

    @model_validator(mode="after")
    def _one_input(self) -> TokenizeBody:
        given = [name for name in ("content", "prompt", "messages") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of content, prompt or messages (got {', '.join(given) or 'none'})")
        return self


class DetokenizeBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = Field(None, max_length=256)
    tokens: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_DETOKENIZE)]


class TokenList(BaseModel):
    tokens: list[Any]  # ids, or {"id", "piece"} with ``with_pieces``
    count: int
    max_model_len: int
    model: str


class Detokenized(BaseModel):
    content: str
    prompt: str  # vLLM's name for the same text
    model: str


def _edge_model(node: Node, model: str | None) -> str:
    """The edge's tokenizer is the one on the box: any other model id is refused."""
    if model in (None, "auto", "edge", node.edge_model):
        return node.edge_model
    if model in node.model_ids():
        raise InvalidRequestError(
            f"only the edge model's tokenizer is on this node ({node.edge_model}); {model!r} is a cloud model",
            param="model", code="invalid_value",
        )
    raise node.unknown_model(model)


def _piece(node: Node, token: int) -> str | list[int]:
    raw = node.edge.piece(token)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # part of a character: llama.cpp's server sends the bytes
        return list(raw)


class TokenizerController(openapi.KeyedController):
    path = "/"
    tags = ["tokenizer"]

    @openapi.api_post("/tokenize", "The edge model's token ids of a text or a chat", TokenList)
    async def tokenize(self, request: Request[Any, Any, State], data: TokenizeBody) -> dict[str, Any]:
        node: Node = request.app.state.node
        model = _edge_model(node, data.model)
        if data.messages is not None:
            check_messages(list(data.messages), node.settings.limits)
            chat = tuple({"role": m.role, "content": m.text()} for m in data.messages)
            gen = GenerationRequest(params=SamplingParams(), messages=chat)
            tokens = await off_loop(prompt_cost(gen), lambda: node.edge.prompt_tokens(gen))
        else:
            text = data.content if data.content is not None else data.prompt or ""
            check_texts([text], node.settings.limits, "prompt")
            tokens = await off_loop(len(text), lambda: node.edge.tokenize(text, add_bos=data.add_special))
        listed: list[Any] = [{"id": t, "piece": _piece(node, t)} for t in tokens] if data.with_pieces else list(tokens)
        return {"tokens": listed, "count": len(tokens), "max_model_len": node.edge.n_ctx, "model": model}

    @openapi.api_post("/detokenize", "The text of the edge model's token ids", Detokenized)
    async def detokenize(self, request: Request[Any, Any, State], data: DetokenizeBody) -> dict[str, Any]:
        node: Node = request.app.state.node
        model = _edge_model(node, data.model)
        vocab = node.edge.n_vocab
        bad = next((t for t in data.tokens if t >= vocab), None)
        if bad is not None:
            raise InvalidRequestError(
                f"token id {bad} is beyond the vocabulary of {model} ({vocab} tokens)", param="tokens", code="invalid_value"
            )
        tokens = list(data.tokens)
        text = (await off_loop(len(tokens) * 4, lambda: node.edge.detokenize(tokens))).decode("utf-8", errors="replace")
        return {"content": text, "prompt": text, "model": model}
