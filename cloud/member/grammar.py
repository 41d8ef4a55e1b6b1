"""Structured output (``response_format``): a JSON Schema as a per-token mask, with llguidance.

llguidance (the grammar engine behind vLLM's "guidance" backend and llama.cpp's optional one) turns
a schema into a grammar over the tokenizer's vocabulary; a matcher then gives, at each step, the
tokens that can continue a string of the grammar, so the answer is JSON matching the schema by
construction. End-of-sequence tokens are allowed only once the JSON is complete. The JSON is
compact (no whitespace, ``,`` and ``:`` alone), as the edge's llama.cpp grammar writes it, so
either engine can continue the other's answer after a fallback. Rank 0 alone chooses tokens, so
only it masks.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import BadRequestError

_PARAM = "response_format"
_CACHE_SIZE = 64  # compiled schemas kept
_COMPACT = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


def _closed(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` on every object that lists its properties
    and does not say otherwise, as llama.cpp's converter reads it (and OpenAI's strict mode asks):
    the answer has the listed keys and no others, on either engine (vLLM's guidance backend
    offers the same switch)."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class Matcher:
    """One generation's grammar state: masks the logits before each choice, then reads the choice."""

    def __init__(self, tokenizer: Any, grammar: str, prefix_ids: list[int]) -> None:
        import llguidance

        self._matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if prefix_ids and not self._matcher.consume_tokens(prefix_ids):
            raise BadRequestError(
                "response_format: the final assistant message is not the start of JSON matching the schema",
                param=_PARAM,
            )

    def mask(self, logits: Any) -> None:
        """Set, in place, the logits of the tokens the grammar does not allow next to -inf."""
        import numpy as np
        import torch

        allowed = np.frombuffer(self._matcher.compute_logit_bias(), dtype=np.uint8)  # 0 or 200 a token
        n = min(allowed.shape[0], logits.shape[-1])
        blocked = torch.from_numpy(allowed[:n] == 0)
        logits[..., :n].masked_fill_(blocked.to(logits.device), float("-inf"))
        logits[..., n:] = float("-inf")  # padding rows of the embedding past the tokenizer's words

    def accept(self, token: int) -> None:
        """Advance the grammar by the chosen token (one the mask allowed)."""
        if not self._matcher.consume_token(token):
            raise RuntimeError(f"the grammar refused token {token}, which its mask allowed: {self._matcher.get_error()}")


@dataclass(frozen=True, slots=True)
class Grammar:
    """A compiled JSON Schema and the answer tokens the generation continues (a continuation's prefix)."""

    tokenizer: Any
    grammar: str
    prefix_ids: tuple[int, ...] = ()

    def matcher(self) -> Matcher:
        """A fresh matcher that has read the prefix (a prefix the schema cannot continue: 400)."""
        return Matcher(self.tokenizer, self.grammar, list(self.prefix_ids))


class Grammars:
    """The JSON Schemas compiled for one tokenizer; the most recent ones are kept, so a repeat is cheap."""

    def __init__(self, tokenizer: Any, vocab_size: int | None, stop_ids: list[int]) -> None:
        self._hf = tokenizer
        self._vocab_size = vocab_size
        self._stop_ids = stop_ids
        self._tokenizer: Any = None
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def _tokenizer_once(self) -> Any:
        """llguidance's view of the vocabulary, built on first use."""
        if self._tokenizer is None:
            import llguidance.hf

            self._tokenizer = llguidance.hf.from_tokenizer(self._hf, n_vocab=self._vocab_size, eos_token=self._stop_ids)
        return self._tokenizer

    def compile(self, json_schema: str, prefix: str = "") -> Grammar:
        """The grammar of a schema (compact JSON text); a schema llguidance refuses, or a bad prefix: 400."""
        from llguidance import LLMatcher

        with self._lock:
            tokenizer = self._tokenizer_once()
            grammar = self._cache.get(json_schema)
            if grammar is not None:
                self._cache.move_to_end(json_schema)
            else:
                try:
                    closed = json.dumps(_closed(json.loads(json_schema)))
                    grammar = LLMatcher.grammar_from_json_schema(closed, defaults=_COMPACT)  # type: ignore[arg-type]
                except (ValueError, RecursionError) as exc:
                    reason = exc if isinstance(exc, ValueError) else "nested too deeply"
                    raise BadRequestError(
                        f"response_format: this JSON Schema cannot be enforced: {reason}", param=_PARAM
                    ) from exc
                error = LLMatcher.validate_grammar(grammar, tokenizer)
                if error:
                    raise BadRequestError(f"response_format: this JSON Schema cannot be enforced: {error}", param=_PARAM)
                self._cache[json_schema] = grammar
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        prefix_ids = tuple(self._hf(prefix, add_special_tokens=False).input_ids) if prefix else ()
        compiled = Grammar(tokenizer, grammar, prefix_ids)
        if prefix:
            compiled.matcher()  # the prefix must be valid now, before the job is queued
        return compiled
