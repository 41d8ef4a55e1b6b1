"""The member's key on every path of vLLM's server, not only the ones vLLM guards.

vLLM's ``--api-key`` guards paths under ``/v1``, ``/v2``, ``/inference`` and ``/cohere``; its
server also answers ``/invocations`` (SageMaker's entry, which runs a completion), ``/tokenize``,
``/pooling``, ``/score`` and others without a key. This ASGI middleware asks for the key on all
of them but the probes a pool reads (``/health``, ``/metrics``, ``/ping``, ``/version``).

It runs inside vLLM's server process, in vLLM's own environment, where nothing of this project is
importable: the launcher's lifeline loads this file by its path and vLLM adds it with
``--middleware``. So it imports the standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

# What a pool member is probed on; nothing here runs the model.
OPEN_PATHS = frozenset({"/health", "/metrics", "/ping", "/version"})
_DENIED = b'{"error":"Unauthorized"}'


class RequireKey:
    """Refuse (401) a request without ``Authorization: Bearer $VLLM_API_KEY`` on any path not open."""

    def __init__(self, app: Any) -> None:
        self.app = app
        key = os.environ.get("VLLM_API_KEY", "")
        self.digest = hashlib.sha256(key.encode()).digest() if key else None

    def allowed(self, scope: dict[str, Any]) -> bool:
        if self.digest is None or scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return True
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path in OPEN_PATHS:
            return True
        header = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        given = hashlib.sha256(token.encode()).digest()
        return scheme.lower() == "bearer" and hmac.compare_digest(given, self.digest)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.allowed(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_DENIED)).encode())]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": _DENIED})
