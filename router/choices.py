"""``n`` choices of one request: each is its own generation through the pipeline, started together.

Choice 0 is the request as sent (the cache may answer it); choices 1..n-1 skip the cache (copies
of one stored answer are not samples) and, when the request has a ``seed``, take ``seed + i``, so
the choices differ and a repeated request repeats them. Each choice is routed and recorded on its
own (a decision record and a log line each, request ids ``<id>-<i>``); the response's headers are
choice 0's. If any choice cannot start, the others are stopped and the request fails as one would.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from models import Chunk, Completion, Usage, collect

from . import pipeline
from .node import Node
from .pipeline import RoutedStream
from .record import RequestRecord

T = TypeVar("T")
MAX_CHOICES = 8  # each choice takes an edge slot or a member's: a bound like the caps of a request


def fan_out(record: RequestRecord, n: int, prompts: Sequence[str] = ()) -> list[RequestRecord]:
    """The records of the ``n`` generations of ``record``'s request, or of each of its ``prompts``
    (a text completion's): choice ``p * n + i`` is prompt ``p``'s ``i``-th."""
    gen, ctx = record.gen, record.ctx
    assert gen is not None  # set by router.respond
    records = [record]
    for index in range(1, n * max(len(prompts), 1)):
        p, i = divmod(index, n)
        seed = gen.params.seed
        # seed + i, kept a 64-bit signed integer as the API bounds a seed (wrapping at the top).
        params = dataclasses.replace(gen.params, seed=None if seed is None else (seed + i + 2**63) % 2**64 - 2**63)
        choice_gen = dataclasses.replace(gen, params=params, request_id=f"{gen.request_id}-{index}")
        if prompts:
            choice_gen = dataclasses.replace(choice_gen, prompt=prompts[p])
        records.append(RequestRecord(choice_gen, ctx if i == 0 else dataclasses.replace(ctx, cache=False)))
    return records


def total_usage(usages: Sequence[Usage], n: int = 0) -> Usage:
    """Each prompt counted once, the completions added up (as OpenAI counts ``n`` choices of
    each prompt; ``n`` 0: one prompt)."""
    firsts = usages[:: n or len(usages)]
    return Usage(sum(u.prompt_tokens for u in firsts), sum(u.completion_tokens for u in usages))


async def _all(work: Sequence[Callable[[], Awaitable[T]]], undo: Callable[[T], Awaitable[None]] | None = None) -> list[T]:
    """Run ``work`` together; on the first failure cancel the rest (and ``undo`` those done), then raise."""
    if len(work) == 1:
        return [await work[0]()]
    tasks = [asyncio.ensure_future(w()) for w in work]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if undo is not None:
            for task in tasks:
                if not task.cancelled() and task.exception() is None:
                    await undo(task.result())
        raise


async def whole(node: Node, records: Sequence[RequestRecord]) -> list[Completion]:
    """Every choice's whole answer."""

    async def one(r: RequestRecord) -> Completion:
        return await collect(await pipeline.run(node, r))

    return await _all([lambda r=r: one(r) for r in records])  # type: ignore[misc]


async def start(node: Node, records: Sequence[RequestRecord]) -> list[RoutedStream]:
    """Every choice started (its first chunk made); none is left running if one cannot start."""
    runs = [lambda r=r: pipeline.run(node, r) for r in records]
    return await _all(runs, RoutedStream.aclose)  # type: ignore[arg-type]


_END = object()


async def merge(streams: Sequence[RoutedStream]) -> AsyncIterator[tuple[int, Chunk]]:
    """Several choices' chunks as they come, each with its choice's index; closing it stops them
    all (one choice is read straight from its :class:`~router.pipeline.RoutedStream`)."""
    queue: asyncio.Queue[tuple[int, object]] = asyncio.Queue()

    async def pump(index: int, chunks: AsyncIterator[Chunk]) -> None:
        try:
            async for chunk in chunks:
                await queue.put((index, chunk))
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            await queue.put((index, exc))
        await queue.put((index, _END))

    tasks = [asyncio.ensure_future(pump(i, aiter(s))) for i, s in enumerate(streams)]
    try:
        live = len(tasks)
        while live:
            index, item = await queue.get()
            if item is _END:
                live -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield index, item  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()  # a choice still generating stops (its pipeline records the early end)
        await asyncio.gather(*tasks, return_exceptions=True)
        for stream in streams:
            await stream.aclose()
