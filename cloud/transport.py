"""HTTP to one member: aiohttp's connection pool and C parser, used directly; each answer comes
back as an ``httpx.Response`` (httpx-aiohttp's body stream and exception map), so the member
client reads and translates it in httpx's terms; httpx-sse reads its event stream (:func:`events`)
from aiohttp's body; and an answer's body read to its end, so its connection serves the next request.

aiohttp is asked directly because the member hop is most of what the node adds in front of a
member: httpx's client over httpx-aiohttp's transport cost ~0.8 ms more a streamed request (`bench.overhead`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json as jsonlib
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp.transport import AiohttpResponseStream, map_aiohttp_exceptions
from httpx_sse import EventSource, ServerSentEvent, SSEError

# Where an answer keeps the aiohttp response it came from.
_AIOHTTP = "edgeroute.aiohttp_response"
# An idle kept connection to a member is closed after this (httpx's default, which the pool had).
_KEEPALIVE_S = 5.0


class MemberHTTP:
    """Requests to one member's server: paths under ``base_url`` (``/chat/completions``) or
    absolute URLs (its ``/health``). The environment's proxy settings apply, as httpx's would."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        max_connections: int,
        connect_timeout_s: float,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self._max_connections = max_connections
        self._connect_timeout_s = connect_timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        # Made on the first request, inside the running event loop, as aiohttp requires.
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=_KEEPALIVE_S)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                # Read deadlines are the caller's (first token, stall, whole answer): none here.
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout_s),
                # Looked up per request, the environment's proxies cost ~80 us: only where it names one.
                trust_env=bool(urllib.request.getproxies()),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),  # a member's answers set no state; matching jars cost
            )
        return self._session

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str, *, json: Any = None, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[httpx.Response]:
        """The answer once its head is in; its body streams until the block ends."""
        full = url if "://" in url else self.base_url + url
        extra = dict(headers or {})
        data = None
        if json is not None:
            data = jsonlib.dumps(json).encode()
            extra["content-type"] = "application/json"
        with map_aiohttp_exceptions():
            answer = await self._open().request(method, full, data=data, headers=extra, allow_redirects=False)
        response = httpx.Response(
            answer.status, headers=answer.raw_headers, stream=AiohttpResponseStream(answer), extensions={_AIOHTTP: answer}
        )
        try:
            yield response
        finally:
            await response.aclose()

    async def request(
        self, method: str, url: str, *, json: Any = None, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        """The whole answer, body read."""
        async with self.stream(method, url, json=json, headers=headers) as response:
            await response.aread()
        return response

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _EventBody:
    """What httpx-sse's :class:`~httpx_sse.EventSource` reads of an answer, its headers and its
    text, with the text decoded straight from aiohttp's body: through httpx's byte, decoder and
    text layers each piece of a stream passed five generators more (~15 us a short stream)."""

    def __init__(self, response: httpx.Response, answer: aiohttp.ClientResponse) -> None:
        self.headers = response.headers
        self._content = answer.content

    async def aiter_text(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # as httpx decodes
        with map_aiohttp_exceptions():
            async for chunk in self._content.iter_any():
                yield decoder.decode(chunk)
        if tail := decoder.decode(b"", final=True):
            yield tail


def events(response: httpx.Response) -> AsyncIterator[ServerSentEvent]:
    """The server-sent events of an answer from :meth:`MemberHTTP.stream`, parsed by httpx-sse
    (:class:`SSEError` when the answer is not an event stream); transport failures arrive as
    httpx's exceptions."""
    body: Any = _EventBody(response, response.extensions[_AIOHTTP])  # read as EventSource reads a response
    return EventSource(body).aiter_sse()


async def read_to_end(events: AsyncIterator[object], deadline: float) -> None:
    """Read what follows the answer up to the end of the body (normally ``[DONE]`` and the chunked
    terminator): a response read to its end gives its connection back to the pool for the next
    request, one left unread is closed, and every request would pay a new connection. The answer
    is already out: a member that fails here only loses its connection."""
    try:
        async with asyncio.timeout_at(deadline):
            while await anext(events, None) is not None:
                pass
    except (TimeoutError, httpx.HTTPError, SSEError):  # held open or cut after the answer: the connection is dropped
        pass
