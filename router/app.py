"""The API's application factory: the node opened in the lifespan, errors mapped to HTTP once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins import PluginProtocol

from models.attempts import AttemptLimiter
from models.ollama import error_body as ollama_error
from models.openai import API_KEYS, KEY_FAILURES, exception_handlers

from .admission import AdmissionMiddleware, Drain
from .api import OpenAIController, healthz, root, root_head
from .feedback_api import FeedbackController
from .guards import BEARER, REQUEST_ID_HEADER
from .llamacpp_api import LlamaCppController
from .node import open_node
from .ollama_api import OllamaController
from .record import RequestRecord
from .responses_api import ResponsesController
from .settings import Settings
from .tokens import TokenizerController


def _route_headers(request: Request[Any, Any, Any], reason: str) -> dict[str, str]:
    """On the API an error is a route too: the headers come from what the pipeline had decided."""
    if not request.url.path.startswith(("/v1/", "/api/")):
        return {}
    record = request.state.get("record")
    headers = (record if isinstance(record, RequestRecord) else RequestRecord()).error_headers(reason)
    rid = request.state.get("request_id")
    if rid:
        headers[REQUEST_ID_HEADER] = rid
    return headers


# What the native APIs call the OpenAI field an engine's error names (their validation errors are
# renamed where they are validated: router.schemas).
_FIELD_NAMES = (("/api/", {"response_format": "format"}), ("/completion", {"response_format": "json_schema"}),
                ("/v1/responses", {"response_format": "text.format"}))


def _error_shape(request: Request[Any, Any, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Errors name the field as the client's API calls it; Ollama's clients read ``error`` as the
    message: its API answers ``{"error": message}``."""
    path = request.url.path
    error = body["error"]
    param = error.get("param")
    if param:
        head, sep, rest = param.partition(".")
        for prefix, names in _FIELD_NAMES:
            if path.startswith(prefix) and head in names:
                renamed = names[head] + sep + rest
                message = str(error["message"])
                if message.startswith(param + ":"):
                    message = renamed + message[len(param):]
                error = {**error, "param": renamed, "message": message}
                body = {**body, "error": error}
                break
    if path.startswith("/api/"):
        return ollama_error(str(error["message"]))
    return body


# /v1 names it (``security`` on the controller); /healthz needs no key.
BEARER_SCHEME = SecurityScheme(
    type="http",
    scheme="bearer",
    description=(
        "An API key: a tenant key (server.api_keys) reaches its own tenant's data, an operator key "
        "(server.operator_keys) every tenant's (naming one in x-edgeroute-tenant). Required whenever "
        "the node has keys; a missing or wrong one is a 401."
    ),
)


def create_api_app(settings: Settings, *, plugins: Sequence[PluginProtocol] = ()) -> Litestar:
    """The OpenAI-compatible API as an ASGI app; the node is opened when the app starts, closed when it stops.

    ``plugins`` mount more on the same app: the node's whole app (API + dashboard) is assembled
    one layer up, by :func:`dashboard.create_app`, so the router never imports the dashboard.
    """

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_node(settings) as node:
            app.state.node = node
            # Everything loaded by now lives as long as the node: frozen, a full collection no
            # longer walks it (router.telemetry.gcwatch).
            with node.telemetry.watch_gc(freeze=settings.server.gc_freeze):
                yield

    drain = Drain()  # read by the server on SIGTERM (router.server)
    return Litestar(
        route_handlers=[OpenAIController, ResponsesController, FeedbackController, OllamaController, LlamaCppController, TokenizerController, healthz, root, root_head],
        plugins=list(plugins),
        lifespan=[lifespan],
        middleware=[AdmissionMiddleware(drain, settings)],
        state=State({
            API_KEYS: settings.server.key_table(),
            KEY_FAILURES: AttemptLimiter(settings.server.bad_key_attempts_per_minute, 60.0),
            "drain": drain,
        }),
        exception_handlers=exception_handlers(_route_headers, _error_shape),
        openapi_config=OpenAPIConfig(
            title="edgeroute",
            version="0.1.0",
            path="/openapi",
            components=Components(security_schemes={BEARER: BEARER_SCHEME}),
        ),
        request_max_body_size=settings.server.max_body_bytes,
        # The node owns logging (router.logs.configure_logging at `serve`): Litestar's default
        # would replace the root handler with its own queue listener, dropping the chosen format.
        logging_config=None,
    )
