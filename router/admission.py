"""The door of the node, before any handler runs: draining, the body (size, read timeout, JSON depth).

One ASGI middleware on every HTTP route:

- while the node drains (SIGTERM), a new request is answered 503 with ``retry-after``, and the
  requests in flight are counted so the server knows when it may stop;
- a request body is read here, with the size cap (413) and a deadline for the whole body (408:
  a client trickling bytes cannot hold a connection for ever), and on ``/v1/`` its JSON nesting is
  measured before any parser sees it (a 100,000-deep array made the decoder raise
  ``RecursionError``, a 500): deeper than ``limits.max_json_depth`` is a 400.

The body is then handed on as one message; later ``receive`` calls go to the client's connection,
so a handler can still hear it disconnect.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import numpy as np
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from .errors import BodyTimeoutError, DrainingError, InvalidRequestError, PayloadTooLargeError
from .limits import ACTIVE
from .settings import Settings

_WITH_BODY = {"POST", "PUT", "PATCH"}
# A JSON string, escapes included; the loop is unrolled, so the regex never backtracks.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def json_depth(body: bytes, limit: int) -> int:
    """The nesting depth of a JSON text, or any number <= ``limit`` when it cannot exceed it.

    Linear and in C (a regex strips the strings, numpy sums the brackets): a 4 MB body costs
    milliseconds. Malformed JSON gives some number; the parser refuses it afterwards.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return 0  # too few openers to be deeper than the limit: the common case, no scan
    stripped = _STRING.sub(b"", body) if b'"' in body else body
    brackets = np.frombuffer(stripped.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    if brackets.size == 0:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps, dtype=np.int64).max())


class Drain:
    """The node's shutdown state: how many requests are in flight, and whether new ones are refused.

    ``draining``: new requests get 503; ``aborting``: streams still running end now with an error
    event and ``[DONE]`` (the drain deadline passed).
    """

    def __init__(self) -> None:
        self.draining = False
        self.aborting = False
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight <= 0:
            self._idle.set()

    async def drain(self, deadline_s: float, abort_grace_s: float = 5.0) -> bool:
        """Refuse new requests, wait up to ``deadline_s`` for the ones in flight, then abort the
        rest and give them ``abort_grace_s`` to write their last event. True when all finished."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), deadline_s)
            return True
        except TimeoutError:
            self.aborting = True
        try:
            await asyncio.wait_for(self._idle.wait(), abort_grace_s)
        except TimeoutError:
            pass
        return False


class AdmissionMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    def __init__(self, drain: Drain, settings: Settings) -> None:
        self.drain = drain
        self.max_body_bytes = settings.server.max_body_bytes
        self.body_timeout_s = settings.server.body_timeout_s
        self.limits = settings.limits

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        drain = self.drain
        # /metrics stays open: Prometheus sees the node draining rather than down.
        if drain.draining and scope["path"] != "/metrics":
            raise DrainingError(
                "the node is shutting down; retry on another node or later", retry_after=5, code="draining"
            )
        # The drain waits for API requests only: a dashboard tab's live stream never ends by itself.
        counted = is_api(scope["path"])
        if counted:
            drain.enter()
        token = ACTIVE.set(self.limits)  # for the body's validator (router.limits.precheck)
        try:
            if scope["method"] in _WITH_BODY:
                body = await self._read_body(scope, receive)
                receive = _replay(body, receive)
            await next_app(scope, receive, send)
        finally:
            ACTIVE.reset(token)
            if counted:
                drain.leave()

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            raise PayloadTooLargeError(
                f"the body is {declared} bytes; at most {self.max_body_bytes}", code="body_too_large"
            )
        parts: list[bytes] = []
        size = 0
        try:
            # One deadline for the whole body, awaited in place (``wait_for`` would make a task
            # per message on Python 3.11: two more turns of the event loop on every request).
            async with asyncio.timeout(self.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        break  # the client left; the handler will find out
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise PayloadTooLargeError(
                            f"the body is over {self.max_body_bytes} bytes", code="body_too_large"
                        )
                    parts.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError as exc:
            raise BodyTimeoutError(
                f"the body did not arrive within {self.body_timeout_s:g}s", code="body_timeout"
            ) from exc
        body = b"".join(parts)
        max_depth = self.limits.max_json_depth
        if is_api(scope["path"]) and json_depth(body, max_depth) > max_depth:
            raise InvalidRequestError(
                f"the JSON body is nested deeper than {max_depth} levels", code="json_too_deep"
            )
        return body


# llama.cpp's server's own endpoints (and vLLM's tokenizer's), at the root.
_ROOT_API = frozenset({"/tokenize", "/detokenize", "/completion", "/completions", "/props"})


def is_api(path: str) -> bool:
    """The API's paths: ``/v1/...``, Ollama's ``/api/...`` and llama.cpp's at the root."""
    return path.startswith(("/v1/", "/api/")) or path in _ROOT_API


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read here once, then the client's own messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            message: Any = {"type": "http.request", "body": body, "more_body": False}
            return message  # type: ignore[no-any-return]
        return await receive()

    return replay
