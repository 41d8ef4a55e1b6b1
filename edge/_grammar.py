"""Structured output (``response_format``): a JSON Schema as a llama.cpp grammar sampler.

llama.cpp's grammar sampler masks every token that cannot continue a string of the grammar, so
the answer is JSON matching the schema by construction (as llama.cpp's server does it). The
schema is turned into GBNF by llama-cpp-python's converter (the same as ``Llama``'s
``response_format``); the sampler then sits first in the request's sampler chain.
"""

from __future__ import annotations

import ctypes
import functools
import json
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


# GBNF's code point escapes (``\x00``, ``\u0000``, ``\U00000000``), an escaped backslash skipped
# first so that ``\\u0000`` (a backslash, then "u0000") is not read as one.
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|.)", re.DOTALL)

# What ``json.dumps`` escapes with a backslash (its ``ensure_ascii`` set): a quote, a backslash,
# control characters and everything past ASCII.
_JSON_ESCAPED = re.compile(r'["\\]|[^ -~]')
_PLACEHOLDERS = range(0xE000, 0xF900)  # the BMP's private-use area


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


class _Literals:
    """A schema's literals (``const``, ``enum``, property names) with every character that
    ``json.dumps`` escapes swapped for a placeholder before conversion, written back after.

    The converter writes a literal as its ``json.dumps`` text but escapes only ``\\r \\n "`` of it
    for the grammar, leaving that text's backslashes alone: ``"\\u0000"`` reached the grammar as a
    NUL (llama.cpp aborts on it), ``"a\\nb"`` as a raw newline inside a JSON string. A private-use
    character the schema holds nowhere comes out of ``json.dumps`` as a ``\\uXXXX`` that the
    converter passes through; it is then replaced by the grammar text of the character's JSON escape."""

    def __init__(self, json_schema: str) -> None:
        self._text = json_schema
        self._lowered = json_schema.lower()  # a placeholder must not appear as an escape either
        self._candidates = iter(_PLACEHOLDERS)
        self._placeholders: dict[str, str] = {}  # a character -> its placeholder
        self._grammar_text: dict[str, str] = {}  # a placeholder's hex, as json.dumps writes it -> grammar text

    def _placeholder(self, match: re.Match[str]) -> str:
        char = match.group(0)
        if char not in self._placeholders:
            for code in self._candidates:
                if chr(code) not in self._text and f"u{code:04x}" not in self._lowered:
                    break
            else:
                raise ResponseFormatError(
                    "response_format: the schema's literals hold too many characters that need escaping", param=_PARAM
                )
            self._placeholders[char] = chr(code)
            escape = json.dumps(char)[1:-1]  # ``\\"``, ``\\n``, ``\\u0000``, ``\\ud835\\udd18``
            self._grammar_text[f"{code:04x}"] = escape.replace("\\", "\\\\").replace('"', '\\"')
        return self._placeholders[char]

    def value(self, value: Any) -> Any:
        """A name, or a ``const`` or ``enum`` value with its strings (object keys too), swapped."""
        if isinstance(value, str):
            return _JSON_ESCAPED.sub(self._placeholder, value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.value(key): self.value(item) for key, item in value.items()}
        return value

    def swap(self, schema: Any) -> None:
        """Swap the schema's literals in place (property names in ``properties``, ``required`` and
        the ``$ref`` pointers that pass through them alike)."""
        nodes = list(subschemas(schema))
        renamed = {id(node["properties"]) for node in nodes if isinstance(node.get("properties"), dict)}
        for node in nodes:  # pointers first, while the keys they name are still the schema's own
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                node["$ref"] = self._pointer(schema, ref, renamed)
        for node in nodes:
            for key in ("const", "enum"):
                if key in node:
                    node[key] = self.value(node[key])
            if isinstance(node.get("properties"), dict):
                node["properties"] = {self.value(name): sub for name, sub in node["properties"].items()}
            if isinstance(node.get("required"), list):
                node["required"] = self.value(node["required"])

    def _pointer(self, schema: Any, ref: str, renamed: set[int]) -> str:
        target, parts = schema, []
        for part in ref[2:].split("/"):
            parts.append(self.value(part) if id(target) in renamed else part)
            target = target.get(part) if isinstance(target, dict) else None
        return "#/" + "/".join(parts)

    def restore(self, gbnf: str) -> str:
        """The converter's grammar with each placeholder written as its character's JSON escape."""
        gbnf = _ESCAPE.sub(lambda m: self._grammar_text.get(m.group(2) or "", m.group(0)), gbnf)
        # Anywhere else (a converter writing a name without json.dumps), a placeholder would stand
        # for another character: refuse rather than enforce the wrong text.
        if any(p in gbnf for p in self._placeholders.values()):
            raise ValueError("a literal reached the grammar unescaped")
        return gbnf


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
        from llama_cpp.llama_grammar import SchemaConverter

        converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        schema = json.loads(json_schema)
        for node in subschemas(schema):
            if isinstance(node.get("pattern"), str):
                node["pattern"] = _expand_shorthands(node["pattern"])
        literals = _Literals(json_schema)
        literals.swap(schema)
        converter.visit(converter.resolve_refs(schema, "stdin"), "")
        gbnf = literals.restore(str(converter.format_grammar()))
    except ResponseFormatError:
        raise  # already says what in the schema cannot be held
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
    """Free a llama.cpp sampler, or both of a :class:`Constrained`."""
    import llama_cpp

    if isinstance(sampler, Constrained):
        free(sampler.grammar)
        sampler = sampler.chain
    if sampler is not None:
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
