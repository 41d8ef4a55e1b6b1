"""llama.cpp's server's own endpoints beside its OpenAI ones: ``POST /completion`` (also
``/completions``), the prompt completed as it is (as the OpenAI text completion it amounts to:
:func:`router.respond.respond`), and ``GET /props``, the server's settings.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State

from models import GenerationRequest
from models.llamacpp import LlamaCppWriter
from models.llamacpp.schemas import DEFAULTS, RANDOM_SEED

from . import openapi
from .node import Node
from .respond import MakeWriter, respond
from .schemas import ChatCompletionRequest, CompletionRequest, LlamaCompletionRequest


def _writer(data: LlamaCompletionRequest, n_ctx: int) -> MakeWriter:
    def make(body: ChatCompletionRequest | CompletionRequest, gen: GenerationRequest) -> LlamaCppWriter:
        # The prompt as text: token ids were read as theirs by then (router.respond.text_prompts).
        prompt = body.prompt_text() if isinstance(body, CompletionRequest) else ""
        return LlamaCppWriter(data.model, prompt, data.generation_settings(n_ctx), probs=data.n_probs > 0)

    return make


class LlamaCppController(openapi.KeyedController):
    path = "/"
    tags = ["llama.cpp"]

    @openapi.api_post(
        ["/completion", "/completions"],
        "llama.cpp's completion: the prompt completed as it is (not OpenAI's shape)",
        openapi.LlamaCompletion, operation_class=openapi.StreamingOperation,
    )
    async def completion(self, request: Request[Any, Any, State], data: LlamaCompletionRequest) -> Response[Any]:
        node: Node = request.app.state.node
        return await respond(request, data.openai(), _writer(data, node.edge.n_ctx))

    @get("/props", summary="llama.cpp's server properties: the edge model and its defaults", responses=openapi.answers(openapi.LlamaProps, 401, 503))
    async def props(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        node: Node = request.app.state.node
        params = {
            "n_predict": -1, "seed": RANDOM_SEED, **DEFAULTS, "repeat_last_n": 64, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "stop": [], "n_probs": 0,
        }
        return {
            "default_generation_settings": {"n_ctx": node.edge.n_ctx, "params": params},
            "total_slots": node.settings.edge.slots,
            "model_alias": node.edge_model,
            "model_path": str(node.edge.spec.path),
            "chat_template": node.edge.chat_template,
            "modalities": {"vision": False, "audio": False},
            "build_info": "edgeroute",
        }
