"""The OpenAI Python SDK's retry rule (``openai._base_client``), as ``bench load``'s clients follow it:
what is retried, and how long a client waits before it tries again."""

from __future__ import annotations

import random

import httpx

__all__ = ["retry_delay_s", "should_retry"]

_RETRIED = {408, 409, 429}
_INITIAL_DELAY_S = 0.5
_MAX_DELAY_S = 8.0


def retry_delay_s(headers: httpx.Headers, retries_done: int, rng: random.Random) -> float:
    """Seconds to wait before retry number ``retries_done + 1``: the server's ``retry-after-ms`` or
    ``retry-after`` when it is within (0, 60], else exponential backoff with jitter."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                wait = float(value) * scale
            except ValueError:
                continue
            if 0 < wait <= 60:
                return wait
    delay = min(_INITIAL_DELAY_S * 2.0**retries_done, _MAX_DELAY_S)
    return delay * (1 - 0.25 * rng.random())


def should_retry(response: httpx.Response) -> bool:
    """Whether the SDK would retry this response (``x-should-retry`` first, then the status)."""
    hint = response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return response.status_code in _RETRIED or response.status_code >= 500
