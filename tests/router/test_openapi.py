"""The OpenAPI document describes the bodies the writers emit: each writer's whole answer (tools,
log probabilities, stop words, a cut answer) validated against the operation's 200 schema, an
error body against its 400. No node: the document is the controllers' own (test_schemathesis.py
fuzzes a real node against it)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
import numpy as np
import pytest
from litestar import Litestar

from models import TokenLogprob, Usage
from models.llamacpp import LlamaCppWriter
from models.ollama import NdjsonWriter, loaded
from models.openai import ChunkWriter, ResponsesBody, ResponseWriter, embedding_list
from models.openai.stream import error_body
from models.openai.tools import FunctionDef, ToolUse
from router.api import OpenAIController, healthz
from router.llamacpp_api import LlamaCppController
from router.ollama_api import OllamaController
from router.responses_api import ResponsesController

LP = [TokenLogprob("Hi", -0.1, b"Hi", (TokenLogprob("Hi", -0.1, b"Hi"), TokenLogprob("Ho", -2.5, b"Ho")))]
FN = FunctionDef(name="f", parameters={"type": "object"})
SETTINGS = ResponsesBody.model_validate({
    "model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
}).echo()


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    app = Litestar([OpenAIController, ResponsesController, OllamaController, LlamaCppController, healthz])
    return app.openapi_schema.to_schema()


BODIES: list[tuple[str, str, str, Any]] = [
    ("/v1/chat/completions", "post", "200", lambda: ChunkWriter("chat", "m", logprobs=True).whole("Hi", "stop", Usage(1, 2), LP, "x")),
    ("/v1/chat/completions", "post", "200", lambda: ChunkWriter("chat", "m", call=ToolUse((FN,), "f")).whole("{}", "stop", Usage(1, 2))),
    ("/v1/chat/completions", "post", "200", lambda: ChunkWriter("chat", "m", call=ToolUse((FN,), auto=True)).whole('{"response": "H', "length", Usage(1, 2))),
    ("/v1/chat/completions", "post", "400", lambda: error_body("bad", "invalid_request_error", "messages", "invalid_value")),
    ("/v1/completions", "post", "200", lambda: ChunkWriter("text", "m", logprobs=True).whole_choices([("Hi", "length", LP), ("", "stop", LP[:0])], Usage(1, 2))),
    ("/v1/embeddings", "post", "200", lambda: embedding_list([np.ones(3)], "e", 3)),
    ("/v1/embeddings", "post", "200", lambda: embedding_list([np.ones(3)], "e", 3, "base64")),
    ("/v1/responses", "post", "200", lambda: ResponseWriter("m", SETTINGS, logprobs=True).whole("Hi", "stop", Usage(1, 2), LP)),
    ("/v1/responses", "post", "200", lambda: ResponseWriter("m", SETTINGS, call=ToolUse((FN,), "f")).whole("{}", "length", Usage(1, 2))),
    ("/api/chat", "post", "200", lambda: NdjsonWriter("chat", "m", logprobs=True).whole("Hi", "stop", Usage(1, 2), LP)),
    ("/api/chat", "post", "200", lambda: loaded("chat", "m", unload=True)),
    ("/api/chat", "post", "400", lambda: {"error": "bad"}),
    ("/api/generate", "post", "200", lambda: NdjsonWriter("generate", "m", logprobs=True).whole("Hi", "length", Usage(1, 2), LP)),
    ("/completion", "post", "200", lambda: LlamaCppWriter("m", "p", {"n_ctx": 8}, probs=True).whole("Hi", "stop", Usage(1, 2), LP, "x")),
]


@pytest.mark.parametrize(("path", "method", "status", "make"), BODIES)
def test_the_document_describes_what_the_writers_emit(doc: dict[str, Any], path: str, method: str, status: str, make: Any) -> None:
    schema = {**doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]}
    schema["components"] = doc["components"]  # its $refs point there
    body = json.loads(json.dumps(make()))
    errors = [f"{list(e.instance_path)}: {e.message[:200]}" for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(body)]
    assert errors == []


def test_a_body_the_document_does_not_describe_is_caught(doc: dict[str, Any]) -> None:
    schema = {**doc["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]}
    schema["components"] = doc["components"]
    assert not jsonschema_rs.Draft202012Validator(schema).is_valid({"id": "x", "choices": []})
