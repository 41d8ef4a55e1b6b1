"""The node's connections send what uvicorn writes within one turn of the event loop as one piece."""

from __future__ import annotations

import asyncio

from router.server import _OneWritePerTurn


class _Transport:
    """Stands in for a socket's transport: keeps what would be sent, one entry per send."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 4321) if name == "peername" else None


async def test_a_head_a_body_and_an_end_written_in_one_turn_leave_as_one_send() -> None:
    sent = _Transport()
    out = _OneWritePerTurn(sent, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    out.write(b"hi")
    out.write(b"")  # h11's end of a content-length body
    assert sent.sent == []
    await asyncio.sleep(0)
    assert sent.sent == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"]
    # The next turn's writes are a send of their own; a close sends what is held first.
    out.write(b"data: x\n\n")
    out.close()
    assert sent.sent[1:] == [b"data: x\n\n"] and sent.closed
    await asyncio.sleep(0)
    assert len(sent.sent) == 2
    assert out.get_extra_info("peername") == ("127.0.0.1", 4321)


async def test_nothing_held_is_written_to_a_closing_transport() -> None:
    sent = _Transport()
    out = _OneWritePerTurn(sent, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"late")
    sent.closed = True  # the peer went away before the turn ended
    await asyncio.sleep(0)
    assert sent.sent == []
