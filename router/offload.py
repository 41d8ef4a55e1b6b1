"""Work on a prompt that can be heavy, kept off the event loop: the edge's preparation (which
renders the chat template and tokenizes) and the privacy scan of a big prompt run on a worker
thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from models import GenerationRequest

T = TypeVar("T")
# Below this cost the work is cheaper than a hop to a thread (~0.1 ms): it runs in place.
_OFFLOAD_COST = 8192


def prompt_cost(gen: GenerationRequest) -> int:
    """The work a prompt costs, in characters (a message counts 64 more: the template renders each)."""
    if gen.messages is None:
        return len(gen.prompt or "")
    return sum(len(m["content"]) + 64 for m in gen.messages)


async def off_loop(cost: int, work: Callable[[], T]) -> T:
    """Run ``work`` here when it is small, else on a worker thread (tokenizing a megabyte of text
    took ~0.6 s here, all of it on the event loop before)."""
    if cost < _OFFLOAD_COST:
        return work()
    return await asyncio.to_thread(work)

