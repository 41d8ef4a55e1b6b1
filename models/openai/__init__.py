"""The OpenAI wire format, written once for every server and client here: request bodies, the
response and stream writer, error bodies and their HTTP mapping, the API-key guard (the servers'
side, on Litestar), and the bodies the cloud pool sends and the events it reads
(:mod:`models.openai.client`, plain Python).

Names are loaded on first use, so the pool's client (``models.openai.client``) imports no
Litestar: a process that only calls members does not pay for the server side.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "API_KEYS": "auth",
    "KEY_FAILURES": "auth",
    "api_key_guard": "auth",
    "bearer_token": "auth",
    "field_path": "errors",
    "exception_handlers": "errors",
    "ChatBody": "schemas",
    "CompletionBody": "schemas",
    "Message": "schemas",
    "ResponsesBody": "responses",
    "ResponseWriter": "response_writer",
    "EmbeddingsBody": "embeddings",
    "embedding_list": "embeddings",
    "ChunkWriter": "stream",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
