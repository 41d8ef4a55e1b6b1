"""Log probabilities in OpenAI's two shapes: chat's ``logprobs.content`` entries and the legacy
completions' parallel lists; written for responses and read back from a member's stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import MalformedEventError
from ..generation import TokenLogprob


def token_entries(entries: Sequence[TokenLogprob]) -> list[dict[str, Any]]:
    """Each generated token with its most likely alternatives: chat's ``logprobs.content``, and as
    Ollama's ``logprobs`` and llama.cpp's ``completion_probabilities`` write them too."""

    def one(e: TokenLogprob) -> dict[str, Any]:
        return {"token": e.token, "logprob": e.logprob, "bytes": list(e.raw)}

    return [{**one(e), "top_logprobs": [one(t) for t in e.top]} for e in entries]


def text_block(entries: Sequence[TokenLogprob], offset: int) -> dict[str, Any]:
    """``choices[].logprobs`` of a text completion or chunk whose text starts at ``offset``."""
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e.token)
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{t.token: t.logprob for t in e.top} for e in entries],
        "text_offset": offsets,
    }


def read_block(block: object) -> tuple[TokenLogprob, ...]:
    """The entries of either shape as a member sent them (``None``: none)."""
    if block is None:
        return ()

    def entry(e: dict[str, Any], top: tuple[TokenLogprob, ...] = ()) -> TokenLogprob:
        return TokenLogprob(e["token"], float(e["logprob"]), bytes(e.get("bytes") or e["token"].encode()), top)

    try:
        if "content" in block:  # type: ignore[operator]
            return tuple(
                entry(e, tuple(entry(t) for t in e.get("top_logprobs") or ()))
                for e in block["content"] or ()  # type: ignore[index]
            )
        tokens, values, tops = block["tokens"], block["token_logprobs"], block.get("top_logprobs") or []  # type: ignore[index,union-attr]
        return tuple(
            TokenLogprob(tok, float(lp), tok.encode(), tuple(TokenLogprob(k, float(v), k.encode()) for k, v in (top or {}).items()))
            for tok, lp, top in zip(tokens, values, tops or [None] * len(tokens), strict=True)
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedEventError(f"malformed logprobs: {str(block)[:80]!r}") from exc
