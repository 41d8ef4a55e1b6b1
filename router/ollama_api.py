"""Ollama's native API under ``/api``: ``chat``, ``generate``, ``embed`` (and the older
``embeddings``), ``tags``, ``ps``, ``show`` and ``version``, so that Ollama's clients (its
Python and JavaScript libraries, LiteLLM's ``ollama_chat/``, tools that take an Ollama URL)
use the node as they use Ollama. A chat or generate request is answered as the OpenAI request
it amounts to (:func:`router.respond.respond`); only the shape differs.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get, post
from litestar.datastructures import State

from models import EMBEDDING_DEFAULT, GenerationRequest, ModelSpec, registry
from models.ollama import (
    CatalogEntry,
    Endpoint,
    NdjsonWriter,
    OllamaEmbedBody,
    OllamaShowBody,
    loaded,
    model_name,
    running,
    show,
    tags,
)

from . import openapi
from .errors import InvalidRequestError
from .guards import REQUEST_ID_HEADER
from .limits import check_texts
from .node import Node
from .respond import MakeWriter, embed_texts, respond
from .schemas import ChatCompletionRequest, CompletionRequest, OllamaChatRequest, OllamaGenerateRequest

# The Ollama release whose API this one follows (clients check it for features).
OLLAMA_VERSION = "0.12.11"


def _writer(endpoint: Endpoint, name: str, logprobs: bool) -> MakeWriter:
    def make(body: ChatCompletionRequest | CompletionRequest, gen: GenerationRequest) -> NdjsonWriter:
        tools = body.tool_use() if isinstance(body, ChatCompletionRequest) else None
        return NdjsonWriter(endpoint, name, logprobs=logprobs, tools=tools)

    return make


def _stamp(path: Any) -> str:
    mtime = path.stat().st_mtime if path.is_file() else 0.0
    return datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _file_entry(model_id: str, spec: ModelSpec, capabilities: tuple[str, ...], ctx: int | None) -> CatalogEntry:
    present = spec.path.is_file()
    return CatalogEntry(
        model_id=model_id, capabilities=capabilities, family=spec.architecture,
        format="gguf" if spec.path.suffix == ".gguf" else "safetensors",
        size=spec.path.stat().st_size if present else 0, modified_at=_stamp(spec.path), digest=spec.sha256,
        quantization=spec.quantization, context_length=ctx, description=spec.description,
    )


def catalog(node: Node) -> list[CatalogEntry]:
    """Every model id the node answers to, as Ollama lists models: the routes, the edge model,
    the cloud models, and the embedding model when it is loaded."""
    spec = node.edge.spec
    edge = _file_entry(node.edge_model, spec, ("completion",), node.settings.edge.n_ctx)
    routes = [
        CatalogEntry(model_id=route, capabilities=("completion",), description=f"edgeroute's {route} route")
        for route in ("auto", "edge", "cloud")
        if route in node.model_ids()
    ]
    clouds = [
        CatalogEntry(model_id=m, capabilities=("completion",), description="a model of the cloud pool")
        for m in node.cloud_models()
        if m != node.edge_model
    ]
    entries = [*routes, edge, *clouds]
    if node.embedder is not None:
        embed_spec = registry(node.settings.models_dir)[EMBEDDING_DEFAULT]
        entries.append(_file_entry(EMBEDDING_DEFAULT, embed_spec, ("embedding",), embed_spec.context_length))
    return entries


def _load_answer(node: Node, endpoint: Endpoint, name: str, unload: bool) -> Response[Any]:
    """An empty prompt or conversation loads the model in Ollama: here it is loaded already."""
    if model_name(name) not in node.model_ids():
        raise node.unknown_model(model_name(name))
    return Response(loaded(endpoint, name, unload))


class OllamaController(openapi.KeyedController):
    path = "/api"
    tags = ["ollama"]

    @openapi.api_post(
        "/chat", "Ollama's chat (streamed as JSON lines unless stream is false)", openapi.OllamaAnswer,
        error=openapi.OllamaError, operation_class=openapi.NdjsonOperation,
    )
    async def chat(self, request: Request[Any, Any, State], data: OllamaChatRequest) -> Response[Any]:
        if not data.messages:
            return _load_answer(request.app.state.node, "chat", data.model, data.unloads)
        return await respond(request, data.openai(), _writer("chat", data.model, bool(data.logprobs)))

    @openapi.api_post(
        "/generate", "Ollama's generate: the prompt in the model's template, or as it is with raw",
        openapi.OllamaAnswer, error=openapi.OllamaError, operation_class=openapi.NdjsonOperation,
    )
    async def generate(self, request: Request[Any, Any, State], data: OllamaGenerateRequest) -> Response[Any]:
        if not data.prompt and not data.system:
            return _load_answer(request.app.state.node, "generate", data.model, data.unloads)
        return await respond(request, data.openai(), _writer("generate", data.model, bool(data.logprobs)))

    @openapi.api_post(
        "/embed", "Ollama's embed: one embedding per input", openapi.OllamaEmbeddings,
        error=openapi.OllamaError,
    )
    async def embed(self, request: Request[Any, Any, State], data: OllamaEmbedBody) -> Response[Any]:
        started = time.perf_counter_ns()
        vectors, tokens = await _embed(request, data)
        body = {
            "model": data.model, "embeddings": vectors, "total_duration": time.perf_counter_ns() - started,
            "load_duration": 0, "prompt_eval_count": tokens,
        }
        return Response(body, headers={REQUEST_ID_HEADER: request.state.request_id})

    @openapi.api_post(
        "/embeddings", "Ollama's older embeddings: the embedding of prompt", openapi.OllamaEmbedding,
        error=openapi.OllamaError,
    )
    async def embeddings(self, request: Request[Any, Any, State], data: OllamaEmbedBody) -> Response[Any]:
        vectors, _ = await _embed(request, data)
        return Response({"embedding": vectors[0] if vectors else []}, headers={REQUEST_ID_HEADER: request.state.request_id})

    @get("/tags", summary="The models a client may ask for, as Ollama lists them", responses=openapi.ollama_answers(openapi.OllamaTags, 401, 503))
    async def list_models(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        return tags(catalog(request.app.state.node))

    @get("/ps", summary="The models loaded on the box", responses=openapi.ollama_answers(openapi.OllamaTags, 401, 503))
    async def loaded_models(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        node: Node = request.app.state.node
        return running([e for e in catalog(node) if e.format])

    @post("/show", summary="One model's details", status_code=200, responses=openapi.ollama_answers(openapi.OllamaShow, 400, 401, 404, 408, 413, 503))
    async def show_model(self, request: Request[Any, Any, State], data: OllamaShowBody) -> dict[str, Any]:
        node: Node = request.app.state.node
        model = data.model_id()
        if model is None:
            raise InvalidRequestError("model is required", param="model")
        for entry in catalog(node):
            if entry.model_id == model:
                return show(entry)
        raise node.unknown_model(model)

    @get("/version", summary="The Ollama API version this one follows", responses=openapi.ollama_answers(openapi.OllamaVersion, 401, 503))
    async def version(self) -> dict[str, str]:
        return {"version": OLLAMA_VERSION}


async def _embed(request: Request[Any, Any, State], data: OllamaEmbedBody) -> tuple[list[list[float]], int]:
    """Each text's embedding by the node's embedder (an empty input loads it: no embeddings)."""
    node: Node = request.app.state.node
    embedder = node.embedding_model(model_name(data.model))
    texts = [t for t in data.texts() if t]
    if not texts:
        return [], 0
    check_texts(texts, node.settings.limits, "input")
    vectors, tokens = await embed_texts(request, embedder, texts, data.model, data.dimensions, data.truncate)
    return [vec.astype(float).tolist() for vec in vectors], tokens
