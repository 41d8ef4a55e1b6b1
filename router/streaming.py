"""A streamed answer's response: its last piece ends the body at once, and the stream's own
clean-up (closing the engines, reading a member's body to its end, recording the decision) runs
after the client has its end.

Litestar's :class:`~litestar.response.Stream` sends the body's end only when its iterator is
exhausted, so everything the generators do on the way out (a member's ``[DONE]`` and chunked
end read back, the decision recorded) came before the client's last byte; it also runs each
response in an anyio task group. Here the producer marks its last piece with :class:`Last`, a
plain asyncio task watches for the client going away, and the iterator is closed one turn of the
event loop after the end went out (:mod:`router.server` sends what a turn wrote in one send).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncGenerator, Iterable
from typing import Any

from litestar import MediaType, Request
from litestar.background_tasks import BackgroundTask, BackgroundTasks
from litestar.datastructures import Cookie
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import Receive, Send
from litestar.utils.helpers import get_enum_string_value

log = logging.getLogger(__name__)


class Last(bytes):
    """The stream's last piece: it goes out with the body's end."""


class EventStream(Stream):
    """A :class:`~litestar.response.Stream` over an async generator whose last piece is a :class:`Last`."""

    def to_asgi_response(  # type: ignore[override]
        self,
        app: Any,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        type_encoders: Any = None,
    ) -> ASGIResponse:
        return _ASGIEventStream(
            background=self.background or background,
            content_length=0,
            cookies=self.cookies if cookies is None else itertools.chain(self.cookies, cookies),
            encoded_headers=encoded_headers,
            encoding=self.encoding,
            headers={**headers, **self.headers} if headers is not None else self.headers,
            is_head_response=is_head_response,
            iterator=self.iterator,  # type: ignore[arg-type]
            media_type=get_enum_string_value(media_type or self.media_type or MediaType.JSON),
            status_code=self.status_code or status_code,
        )


class _ASGIEventStream(ASGIStreamingResponse):
    __slots__ = ()

    async def send_body(self, send: Send, receive: Receive) -> None:
        iterator: AsyncGenerator[bytes, None] = self.iterator  # type: ignore[assignment]
        task = asyncio.current_task()
        assert task is not None
        ended = False

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    if not ended:
                        task.cancel()  # the client went away: the generation stops
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            async for piece in iterator:
                last = isinstance(piece, Last)
                ended = last
                await send({"type": "http.response.body", "body": bytes(piece), "more_body": not last})
                if last:
                    break
            else:
                ended = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not watcher.done() or watcher.cancelled() or task.cancelling() > 1:
                raise  # cancelled from elsewhere (the server stops)
            task.uncancel()  # the client's leaving ends the response, as Litestar's cancel scope does
            return
        finally:
            watcher.cancel()
        await asyncio.sleep(0)  # the end leaves first
        try:
            await iterator.aclose()
        except Exception:  # noqa: BLE001 - the client has its whole answer; the failure is logged
            log.exception("a stream's clean-up failed after its end was sent")
