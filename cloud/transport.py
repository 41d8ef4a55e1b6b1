"""The pool's HTTP transport: httpx's client API (and httpx-sse on top of it) over aiohttp's
connection pool and C HTTP parser, through httpx-aiohttp.

The member client is the largest part of what the node adds in front of a member. One whole
request to an instant member cost a client 1.1 ms of CPU over httpx's own transport (httpcore over
anyio, h11 in Python) and 0.55 ms over aiohttp, on this project's 2-core machine. The client
code, its errors and its timeouts stay httpx's: httpx-aiohttp maps aiohttp's exceptions to httpx's
(a refused connection arrives as ``httpx.ConnectTimeout``, a body cut short as
``httpx.ReadError``).
"""

from __future__ import annotations

import urllib.request

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport


def member_transport(limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """The transport for a member's client; None (httpx's default) where the environment names a
    proxy, because httpx applies the environment's proxies only to clients without their own."""
    if urllib.request.getproxies():
        return None

    def session() -> aiohttp.ClientSession:
        # Built on the first request, inside the running event loop, as aiohttp requires.
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,  # 0: no limit, as httpx's None
            keepalive_timeout=limits.keepalive_expiry,
        )
        return aiohttp.ClientSession(connector=connector)

    return AiohttpTransport(limits=limits, client=session)
