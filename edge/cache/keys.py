"""Cache keys: what makes two requests the same question with the same answer-changing parameters.

The exact key hashes everything. The semantic layer splits a request into the *text* that is
compared by meaning (the last user turn) and a *scope* that must match exactly: tenant, model
alias, parameters, extra fields and a digest of the rest of the conversation.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from models import SamplingParams


@dataclass(frozen=True, slots=True)
class CacheKey:
    """A request as the cache sees it."""

    tenant: str
    model: str  # the model alias as requested
    messages: tuple[dict[str, str], ...] | None
    prompt: str | None
    params: SamplingParams
    extra: Mapping[str, Any] = field(default_factory=dict)  # tools, response_format, ...


def normalize_text(text: str) -> str:
    """Unicode NFC, unified newlines, outer whitespace stripped; inner whitespace kept (code)."""
    return unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n").strip()


# Sampling that can only give the likeliest answer (or differ from it only at a tie) is keyed as
# greedy: the bounds and why are docs/cache.md's "What is cached".
GREEDY_TEMPERATURE = 0.01
GREEDY_TOP_P = 0.01
GREEDY_MIN_P = 0.99


def greedy_equivalent(params: SamplingParams) -> bool:
    """Whether ``params`` ask for the likeliest answer (temperature 0, or a sampler narrowed to it)."""
    return (
        params.temperature <= GREEDY_TEMPERATURE
        or params.top_k == 1
        or params.top_p <= GREEDY_TOP_P
        or (params.min_p is not None and params.min_p >= GREEDY_MIN_P)
    )


def skip_probability(params: SamplingParams, by_temperature: bool) -> float:
    """GPTCache's: 1 / (1 + e^(1/T)) for a sampled request (0.12 at T = 0.5, 0.27 at 1), every one
    from T = 2 on, none for a greedy (or greedy-equivalent: :func:`greedy_equivalent`) or
    seeded one; 0 unless ``by_temperature``."""
    t = params.temperature
    if not by_temperature or params.deterministic or greedy_equivalent(params):
        return 0.0
    return 1.0 if t >= 2.0 else 1.0 / (1.0 + math.exp(1.0 / t))


def _params(params: SamplingParams) -> dict[str, Any]:
    greedy = greedy_equivalent(params)
    # Greedy decoding ignores the sampler and the seed; a sampled answer is one draw, keyed by them.
    fields: dict[str, Any] = {
        "max_tokens": params.max_tokens,
        "temperature": 0.0 if greedy else float(params.temperature),
        "top_p": None if greedy else float(params.top_p),
        "seed": None if greedy else params.seed,
        "stop": sorted(set(params.stop)),
    }
    # Each only when set: the keys of requests without them stay as they were.
    if params.frequency_penalty:
        fields["frequency_penalty"] = float(params.frequency_penalty)
    if params.presence_penalty:
        fields["presence_penalty"] = float(params.presence_penalty)
    if params.logit_bias:
        fields["logit_bias"] = [list(pair) for pair in params.logit_bias]
    if params.json_schema is not None:
        fields["json_schema"] = params.json_schema
    if not greedy and params.top_k is not None:
        fields["top_k"] = params.top_k
    if not greedy and params.min_p is not None:
        fields["min_p"] = float(params.min_p)
    if params.repeat_penalty != 1.0:
        fields["repeat_penalty"] = float(params.repeat_penalty)
    return fields


def _messages(messages: tuple[dict[str, str], ...]) -> list[list[str]]:
    return [[str(m.get("role", "")), normalize_text(str(m.get("content") or ""))] for m in messages]


def _digest(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _scoped(key: CacheKey) -> dict[str, Any]:
    """What both keys hash besides the text: tenant, model, parameters and extra fields."""
    return {
        "v": 1, "tenant": key.tenant, "model": key.model, "params": _params(key.params), "extra": dict(key.extra),
    }


def exact_key(key: CacheKey) -> str:
    """sha256 over tenant, model, normalized messages or prompt, parameters and extra fields."""
    body = _scoped(key)
    if key.messages is not None:
        body["messages"] = _messages(key.messages)
    else:
        body["prompt"] = normalize_text(key.prompt or "")
    return _digest(body)


@dataclass(frozen=True, slots=True)
class SemanticParts:
    text: str  # compared by meaning
    scope: str  # must match exactly (hex digest)


def _last_user(msgs: list[list[str]]) -> int:
    return max((i for i, m in enumerate(msgs) if m[0] == "user"), default=-1)


def embedding_text(
    messages: tuple[dict[str, str], ...] | None, prompt: str | None, max_chars: int | None = None
) -> str:
    """The text a prompt is embedded by, for the semantic cache and the complexity score alike:
    the last user turn (or the raw prompt), normalized; cut to ``max_chars`` when given."""
    if messages is None:
        text = normalize_text(prompt or "")
    else:
        msgs = _messages(messages)
        last = _last_user(msgs)
        text = msgs[last][1] if last >= 0 else ""
    return text if max_chars is None else text[:max_chars]


def semantic_parts(key: CacheKey) -> SemanticParts:
    """Split a request into its embedding text and the exact scope it must share with a match."""
    text = embedding_text(key.messages, key.prompt)
    if key.messages is not None:
        msgs = _messages(key.messages)
        last = _last_user(msgs)
        context = msgs[:last] + [["<turn>", ""]] + msgs[last + 1 :] if last >= 0 else msgs
    else:
        context = [["<prompt>", ""]]
    return SemanticParts(text=text, scope=_digest({**_scoped(key), "context": context}))


def request_record(key: CacheKey) -> dict[str, Any]:
    """The normalized request, as stored with an entry (for export and inspection)."""
    record: dict[str, Any] = {"model": key.model, "params": _params(key.params), "extra": dict(key.extra)}
    if key.messages is not None:
        record["messages"] = [{"role": r, "content": c} for r, c in _messages(key.messages)]
    else:
        record["prompt"] = normalize_text(key.prompt or "")
    return record
