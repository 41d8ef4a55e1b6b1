"""A simulated WAN on loopback: a TCP proxy that holds every byte for half a round trip each way.

The kernel's netem would do this inside a network namespace, but not every VM ships its
module (``tc qdisc ... netem``: "Specified qdisc kind is unknown" on this project's VMs); a
proxy in the benchmark's own process needs nothing from the host. Order and bandwidth are
kept: each chunk read is written ``rtt_ms / 2`` after it arrived, behind the chunks before it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            await asyncio.sleep(max(0.0, due - loop.time()))
            writer.write(data)
            await writer.drain()
        with suppress(OSError):
            writer.write_eof()

    sender = asyncio.create_task(deliver())
    try:
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay_s, data))
    except OSError:
        pass
    finally:
        queue.put_nowait((0.0, b""))
        with suppress(OSError, ConnectionError):
            await sender


@contextmanager
def delayed_proxy(target_host: str, target_port: int, rtt_ms: float) -> Iterator[int]:
    """A loopback port that forwards to ``target_host:target_port`` with ``rtt_ms`` of round trip."""
    loop = asyncio.new_event_loop()
    delay_s = rtt_ms / 2000.0

    writers: set[asyncio.StreamWriter] = set()  # the clients' connections, closed at the stop

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        writers.add(client_w)
        try:
            server_r, server_w = await asyncio.open_connection(target_host, target_port)
        except OSError:
            writers.discard(client_w)
            client_w.close()
            return
        try:
            # The connection itself takes a round trip, as a TCP handshake across the WAN would.
            await asyncio.sleep(2 * delay_s)
            await asyncio.gather(_pump(client_r, server_w, delay_s), _pump(server_r, client_w, delay_s))
        finally:
            writers.discard(client_w)
            for w in (client_w, server_w):
                w.close()

    async def stop() -> None:
        server.close()
        for w in list(writers):
            w.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, name="wan-proxy", daemon=True)
    thread.start()
    try:
        yield port
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
