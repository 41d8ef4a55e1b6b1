"""The OpenAI-compatible HTTP surface: /v1/chat/completions, /v1/completions, /v1/embeddings,
/v1/models, /healthz (the Responses API: :mod:`router.responses_api`). Embeddings are not
routed: the node's embedder answers them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

from litestar import MediaType, Request, Response, get, head
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion

from models.openai import ChunkWriter, EmbeddingsBody, embedding_list

from . import openapi
from .guards import REQUEST_ID_HEADER
from .limits import check_texts
from .node import Node
from .respond import embed_texts, respond
from .schemas import ChatCompletionRequest, CompletionRequest


class OpenAIController(openapi.KeyedController):
    path = "/v1"
    tags = ["openai"]

    @openapi.api_post(
        "/chat/completions", "Create a chat completion", ChatCompletion,
        operation_class=openapi.StreamingOperation,
    )
    async def chat_completions(self, request: Request[Any, Any, State], data: ChatCompletionRequest) -> Response[Any]:
        return await respond(request, data, ChunkWriter.for_body)

    @openapi.api_post(
        "/completions", "Create a text completion", Completion, operation_class=openapi.StreamingOperation,
    )
    async def completions(self, request: Request[Any, Any, State], data: CompletionRequest) -> Response[Any]:
        return await respond(request, data, ChunkWriter.for_body)

    @openapi.api_post(
        "/embeddings", "Create embeddings (the node's embedding model, all-minilm-l6-v2)",
        openapi.EmbeddingList,
    )
    async def embeddings(self, request: Request[Any, Any, State], data: EmbeddingsBody) -> Response[Any]:
        """Each input embedded by the node's embedder, in the tenant's turn with the cache's lookups."""
        started = time.perf_counter()
        node: Node = request.app.state.node
        texts = data.texts()
        check_texts(texts, node.settings.limits, "input")
        embedder = node.embedding_model(data.model)
        vectors, tokens = await embed_texts(request, embedder, texts, data.model, data.dimensions)
        headers = {
            REQUEST_ID_HEADER: request.state.request_id,
            "x-edgeroute-latency-ms": f"{(time.perf_counter() - started) * 1000:.1f}",
        }
        return Response(embedding_list(vectors, data.model, tokens, data.encoding_format), headers=headers)

    @get(
        "/models", summary="List the model ids a client may send (the embedding model's too)", responses=openapi.answers(openapi.ModelList, 401, 503)
    )
    async def models(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        node: Node = request.app.state.node
        return {"object": "list", "data": [_model_entry(m) for m in node.listed_models()]}

    # ``path``: a cloud model id may hold a slash ("org/model"), which the SDK sends unescaped.
    # Litestar documents a path parameter as format "uri"; a model id is a plain string.
    @get(
        "/models/{model_id:path}",
        summary="Retrieve one model id",
        responses=openapi.answers(Model, 401, 404, 503),
    )
    async def model(
        self, request: Request[Any, Any, State],
        model_id: Annotated[Path, Parameter(description="A model id", schema_extra={"format": None})],
    ) -> dict[str, Any]:
        node: Node = request.app.state.node
        wanted = str(model_id).lstrip("/")
        if wanted not in node.listed_models():
            raise node.unknown_model(wanted)
        return _model_entry(wanted)


def _model_entry(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "edgeroute"}


# Ollama's clients probe the root (its CLI's heartbeat is ``HEAD /``); a person who opens it
# learns where things are.
@get(
    "/",
    summary="A plain-text line saying the node runs and where its APIs are",
    tags=["ops"],
    media_type=MediaType.TEXT,
    responses={200: ResponseSpec(str, description="The line", generate_examples=False, media_type=MediaType.TEXT)},
)
async def root() -> str:
    return "edgeroute is running: OpenAI's API at /v1, Ollama's at /api, the dashboard at /dashboard\n"


@head("/", include_in_schema=False)
async def root_head() -> None:
    return None


# ``/health`` too: llama.cpp's server and vLLM answer there, and probes written for them ask it.
@get(
    ["/healthz", "/health"],
    summary="Liveness and the edge's load (503 while the node drains)",
    tags=["ops"],
    responses=openapi.answers(openapi.Health, 503),
)
async def healthz(request: Request[Any, Any, State]) -> dict[str, Any]:
    node: Node = request.app.state.node
    load = node.edge.load()
    body: dict[str, Any] = {
        "status": "ok",
        "edge": {"model": node.edge_model, "running": load.running, "waiting": load.waiting},
    }
    if node.pool is not None:
        members = node.pool.status()
        body["cloud"] = {"members": len(members), "healthy": sum(1 for m in members if m.healthy)}
    return body
