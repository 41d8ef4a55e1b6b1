"""Work on a prompt that can be heavy, kept off the event loop: token counting (which renders the
chat template) and the privacy scan of a big prompt run on a worker thread, and a prompt that
cannot fit the edge is refused from that count, so the engine never tokenizes it on the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from models import GenerationRequest

from .errors import InvalidRequestError

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


def check_edge_context(n_ctx: int, gen: GenerationRequest, prompt_tokens: int, at_least: bool = False) -> None:
    """The edge's own context check (as :class:`edge.LlamaEngine` makes it), from the count
    made off the loop (``at_least``: a lower bound from the prompt's length)."""
    wanted = gen.params.max_tokens
    if prompt_tokens >= n_ctx or (wanted is not None and prompt_tokens + wanted > n_ctx):
        asked = f" + max_tokens {wanted}" if wanted is not None else ""
        raise InvalidRequestError(
            f"this model's context window is {n_ctx} tokens; the prompt has "
            f"{'at least ' if at_least else ''}{prompt_tokens} tokens"
            f"{asked}. Shorten the messages or lower max_tokens.",
            param="messages" if gen.is_chat else "prompt",
            code="context_length_exceeded",
        )
