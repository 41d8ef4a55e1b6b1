"""Structured output (``response_format``): a JSON Schema as a llama.cpp grammar sampler.

llama.cpp's grammar sampler masks every token that cannot continue a string of the grammar, so
the answer is JSON matching the schema by construction (as llama.cpp's server does it). The
schema is turned into GBNF by llama-cpp-python's converter (the same as ``Llama``'s
``response_format``); the sampler then sits first in the request's sampler chain.
"""

from __future__ import annotations

import ctypes
import functools
import re
from typing import Any

from models.schema_bounds import subschemas

from .errors import ResponseFormatError

_PARAM = "response_format"
# llama.cpp's grammar parser recurses per nesting level and overflows the stack (SIGSEGV) on
# grammars of a few hundred thousand characters (``maxLength: 20000`` is 160k); below 40k it
# parses or refuses cleanly.
MAX_GBNF_CHARS = 32_000
_SPACE = re.compile(r'^space ::= " "\?$', re.MULTILINE)
_NO_SPACE = 'space ::= ""'


# GBNF escapes of code point 0 (``\x00``, ``\u0000``, ``\U00000000``), an escaped backslash
# skipped first so that ``\\u0000`` (a backslash, then "u0000") is not read as one.
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|.)", re.DOTALL)
_LITERAL_ESCAPES = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", '"': '\\"'}
_LITERAL_SPECIAL = re.compile(r'[\\\r\n"]')


# A pattern's shorthand classes as class bodies: llama-cpp-python's converter copies ``\d`` into
# the grammar as it stands, which llama.cpp's grammar parser refuses (and ``\d{4}`` it garbles).
# A JSON string holds a space unescaped but no other whitespace, so ``\s`` matches a space.
_SHORTHANDS = {"d": "0-9", "w": "0-9A-Za-z_", "s": " "}
# The negated ones leave out what cannot stand unescaped in a JSON string as well.
_NOT_IN_JSON_STRING = r'"\\\x00-\x1F'


def _expand_shorthands(pattern: str) -> str:
    r"""``pattern`` with ``\d \w \s \D \W \S`` written as character classes."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            body = _SHORTHANDS.get(escaped.lower())
            if body is None:
                out.append(pattern[i : i + 2])
            elif escaped.islower():
                out.append(body if in_class else f"[{body}]")
            elif in_class:
                raise ResponseFormatError(
                    f"response_format: a pattern's \\{escaped} inside [...] is not supported; write its characters out",
                    param=_PARAM,
                )
            else:
                out.append(f"[^{body}{_NOT_IN_JSON_STRING}]")
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def _converter() -> Any:
    """llama-cpp-python's JSON-Schema-to-GBNF converter, with its literals escaped in full.

    Its own escaping leaves backslashes alone, so the JSON text of a string literal (``"\\u0000"``,
    ``"a\\nb"``) reached the grammar as an escape of a control character: a NUL that llama.cpp
    aborts on (it ends a token's characters with one), a raw newline inside a JSON string."""
    from llama_cpp.llama_grammar import SchemaConverter

    class _Converter(SchemaConverter):  # type: ignore[misc]
        def _format_literal(self, literal: str) -> str:
            return '"' + _LITERAL_SPECIAL.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], literal) + '"'

    return _Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _json_schema_to_gbnf(json_schema: str) -> str:
    import json

    converter = _converter()
    schema = json.loads(json_schema)
    for node in subschemas(schema):
        if isinstance(node.get("pattern"), str):
            node["pattern"] = _expand_shorthands(node["pattern"])
    schema = converter.resolve_refs(schema, "stdin")
    converter.visit(schema, "")
    return str(converter.format_grammar())


def _check_encodable(gbnf: str) -> None:
    """What llama.cpp cannot take as a grammar: a NUL (raw or escaped) outside a negated class,
    or text that is not UTF-8 (a lone surrogate from a pattern)."""
    for m in _ESCAPE.finditer(gbnf):
        code = m.group(1) or m.group(2) or m.group(3)
        if code is not None and int(code, 16) == 0:
            before = gbnf[: m.start()]
            opened = before.rfind("[")
            in_negated = opened > before.rfind("]") and gbnf.startswith("[^", opened)
            if not in_negated and not gbnf.startswith("-", m.end()):
                raise ResponseFormatError(
                    "response_format: the schema asks for a NUL character, which no grammar can hold", param=_PARAM
                )
    if "\x00" in gbnf or any(ord(c) < 0x20 and c != "\n" for c in gbnf):
        raise ResponseFormatError("response_format: the schema holds a raw control character", param=_PARAM)
    try:
        gbnf.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ResponseFormatError("response_format: the schema holds text that is not valid Unicode", param=_PARAM) from exc


@functools.lru_cache(maxsize=64)
def gbnf_for(json_schema: str) -> str:
    """The GBNF grammar of a JSON Schema (canonical JSON text); a schema it cannot express: 400.

    The schema's counts were bounded when the request was validated (``models.schema_bounds``),
    so the converter's expansion is small before it starts."""
    try:
        gbnf = _json_schema_to_gbnf(json_schema)
    except Exception as exc:  # the converter asserts, or fails on a shape it does not expect
        raise ResponseFormatError(
            f"response_format: this JSON Schema cannot be enforced: {exc or type(exc).__name__}", param=_PARAM
        ) from exc
    _check_encodable(gbnf)
    # Compact JSON, no whitespace between tokens, as the cloud members' llguidance is set up: an
    # answer either engine started, the other can continue after a fallback; and a tiny model
    # cannot drift into indenting ever deeper.
    gbnf = _SPACE.sub(lambda _: _NO_SPACE, gbnf)
    if len(gbnf) > MAX_GBNF_CHARS:
        raise ResponseFormatError(
            f"response_format: this JSON Schema's grammar is {len(gbnf)} characters, over the "
            f"{MAX_GBNF_CHARS} allowed (lower maxLength / minLength / item counts)",
            param=_PARAM,
        )
    return gbnf


def grammar_sampler(vocab: Any, gbnf: str) -> Any:
    """A fresh llama.cpp grammar sampler (the caller owns it, or a chain it is added to)."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
    if not sampler:
        raise ResponseFormatError("response_format: llama.cpp could not parse the schema's grammar", param=_PARAM)
    return sampler


def allows(sampler: Any, token: int) -> bool:
    """Whether the grammar, in its current state, lets ``token`` come next."""
    import llama_cpp

    data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
    candidates = llama_cpp.llama_token_data_array(
        data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
    return bool(data[0].logit != float("-inf"))


def advance(sampler: Any, tokens: list[int]) -> bool:
    """Feed the answer so far (a continuation's prefix) through the grammar; False where it breaks
    the grammar (nothing is accepted past that token: llama.cpp aborts on an impossible one)."""
    import llama_cpp

    for token in tokens:
        if not allows(sampler, token):
            return False
        llama_cpp.llama_sampler_accept(sampler, token)
    return True


def free(sampler: Any) -> None:
    import llama_cpp

    llama_cpp.llama_sampler_free(sampler)


class Candidates:
    """One reusable llama.cpp candidate array over the whole vocabulary (the scheduler's thread
    only), filled from a row of logits."""

    def __init__(self, n_vocab: int) -> None:
        import llama_cpp
        import numpy as np

        self._ids = np.arange(n_vocab, dtype=np.intc)
        self.data = np.recarray((n_vocab,), dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
        self.array = llama_cpp.llama_token_data_array(
            data=self.data.ctypes.data_as(llama_cpp.llama_token_data_p), size=n_vocab, selected=-1, sorted=False
        )
        self.ref = ctypes.byref(self.array)

    def fill(self, logits: Any) -> Candidates:
        self.data.id[:] = self._ids
        self.data.logit[:] = logits
        self.data.p[:] = 0.0
        self.array.size, self.array.selected, self.array.sorted = len(self._ids), -1, False
        return self

    def selected(self) -> int:
        return int(self.array.data[self.array.selected].id)

    def best(self) -> int:
        """The token of the largest logit among the candidates (greedy after the grammar's mask)."""
        n = self.array.size
        return int(self.data.id[: n][int(self.data.logit[: n].argmax())])


class Constrained:
    """A request's grammar beside its sampling, in llama.cpp server's order: the token the sampling
    picks (the argmax, or the chain's draw) is kept when the grammar allows it, which is one
    single-token check; only otherwise does the grammar mask the whole vocabulary and the
    sampling run again. Masking 49k tokens every step cost ~7 ms a token; the check, microseconds."""

    def __init__(self, grammar: Any, chain: Any | None) -> None:
        self.grammar = grammar
        self.chain = chain  # None: greedy

    def sample(self, logits: Any, candidates: Candidates) -> int:
        import llama_cpp

        chain = self.chain
        if chain is None:
            token = int(logits.argmax())
        else:
            llama_cpp.llama_sampler_apply(chain, candidates.fill(logits).ref)
            token = candidates.selected()
        if not allows(self.grammar, token):
            llama_cpp.llama_sampler_apply(self.grammar, candidates.fill(logits).ref)
            if chain is None:
                token = candidates.best()
            else:
                llama_cpp.llama_sampler_apply(chain, candidates.ref)
                token = candidates.selected()
        llama_cpp.llama_sampler_accept(self.grammar, token)
        if chain is not None:
            llama_cpp.llama_sampler_accept(chain, token)
        return token

    def free(self) -> None:
        free(self.grammar)
        if self.chain is not None:
            free(self.chain)
