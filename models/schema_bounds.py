"""What a JSON Schema will cost to enforce, read from the schema itself before any grammar exists.

A schema is turned into a grammar per request (llama.cpp's GBNF on the edge, llguidance in a
vLLM member). Converters expand counts: ``minLength: 1000000000`` becomes a billion repetitions,
``(a{100}){100}`` in a ``pattern`` ten thousand, before any size check on the result can run. So
the counts are bounded here, on the schema's own numbers, where checking costs microseconds;
the grammar's own size is checked again once it is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# One unit is one repetition a converter writes out (a character of a string, an item of an
# array, an atom of a pattern). The edge's grammar cap (32,000 characters) is reached near 4,000
# units, so 8,192 only refuses what could never compile, and keeps every count small.
MAX_UNITS = 8_192
MAX_DEPTH = 48  # nesting of subschemas; converters recurse per level (Python's limit is 1,000 frames)
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
               "unevaluatedItems", "unevaluatedProperties", "additionalItems")
# A NUL cannot be written in a grammar: llama.cpp ends a token's characters with one, so a
# pattern that asks for it can never be satisfied (and llama.cpp aborts trying). A raw control
# character cannot appear in a JSON string either.
_PATTERN_NUL = re.compile(r"\\\\|\\(?:0|x0{2}|x\{0+\}|u0{4}|c@)(?![0-9a-fA-F])|[\x00-\x1f\x7f]")
_QUANT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


class SchemaTooCostlyError(ValueError):
    """The schema asks for more than any engine here will compile; the message says what."""


def check_schema(schema: Any, where: str, *, spent: int = 0) -> int:
    """Refuse a schema whose counts, nesting or patterns would make its grammar unbounded.

    ``where`` names the schema in messages (``schema``, ``tools[0].function.parameters``);
    ``spent`` is what other schemas compiled into the same grammar already cost. Raises
    :class:`SchemaTooCostlyError`; else returns the schema's own units.
    """
    units = spent
    for path, node, depth in _walk(schema, where, 0):
        if depth > MAX_DEPTH:
            raise SchemaTooCostlyError(f"{path}: subschemas are nested deeper than {MAX_DEPTH} levels")
        for key in _COUNTS:
            if key in node:
                units += _count(node[key], f"{path}.{key}")
        pattern = node.get("pattern")
        if pattern is not None:
            units += _pattern_units(pattern, f"{path}.pattern")
        if units > MAX_UNITS:
            raise SchemaTooCostlyError(
                f"{path}: the schema's lengths, item counts and pattern repetitions add up to more than "
                f"{MAX_UNITS} (lower minLength / maxLength / minItems / maxItems or the pattern's counts)"
            )
    return units - spent


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in ``schema``, itself first (not the values of ``const``, ``enum`` or
    ``default``, which are data)."""
    for _, node, _ in _walk(schema, "", 0):
        yield node


def _walk(node: Any, path: str, depth: int) -> Iterator[tuple[str, dict[str, Any], int]]:
    if not isinstance(node, dict):
        return
    yield path, node, depth
    for key in _SUBSCHEMA_MAPS:
        children = node.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield from _walk(child, f"{path}.{key}.{name}", depth + 1)
    for key in (*_SUBSCHEMA_LISTS, *_SUBSCHEMAS):
        child = node.get(key)
        if isinstance(child, list):  # also the older tuple form of ``items``
            for i, item in enumerate(child):
                yield from _walk(item, f"{path}.{key}[{i}]", depth + 1)
        elif key in _SUBSCHEMAS:
            yield from _walk(child, f"{path}.{key}", depth + 1)


def _count(value: Any, path: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SchemaTooCostlyError(f"{path} must be a whole number of 0 or more")
    if value > MAX_UNITS:
        raise SchemaTooCostlyError(f"{path} is {value}, over the {MAX_UNITS} a grammar can hold")
    return value


def _pattern_units(pattern: Any, path: str) -> int:
    """The repetitions a pattern expands to: counts multiply through nested groups and add
    across a sequence (``(a{100}){100}`` is 10,000; ``a{100}b{100}`` is 200)."""
    if not isinstance(pattern, str):
        raise SchemaTooCostlyError(f"{path} must be a string")
    if any(m.group(0) != "\\\\" for m in _PATTERN_NUL.finditer(pattern)):  # an escaped backslash is a backslash
        raise SchemaTooCostlyError(f"{path} asks for a NUL or a raw control character, which no JSON string holds")
    stack: list[list[int]] = [[0, 0]]  # per open group: [units of the finished alternatives' max, units so far]
    last = 0  # units of the atom a quantifier would repeat
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            last, i = 1, i + 2
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            last, i = 1, j + 1
        elif c == "(":
            stack.append([0, 0])
            last, i = 0, i + 1
            continue
        elif c == ")":
            if len(stack) == 1:
                raise SchemaTooCostlyError(f"{path} has an unbalanced ')'")
            best, cur = stack.pop()
            last, i = max(best, cur), i + 1
        elif c == "|":
            top = stack[-1]
            top[0], top[1] = max(top[0], top[1]), 0
            last, i = 0, i + 1
            continue
        elif c == "{" and (m := _QUANT.match(pattern, i)) and (m.group(1) or m.group(2)):
            low = int(m.group(1) or 0)
            high = int(m.group(2)) if m.group(2) else low
            times = max(low, high)
            if times > MAX_UNITS:
                raise SchemaTooCostlyError(f"{path} repeats {times} times, over the {MAX_UNITS} a grammar can hold")
            stack[-1][1] += last * (times - 1)
            last, i = last * times, m.end()
            if stack[-1][1] > MAX_UNITS:
                raise SchemaTooCostlyError(f"{path} expands to more than {MAX_UNITS} repetitions")
            continue
        elif c in "*+?^$":  # an unbounded repeat is a loop in the grammar, not copies; anchors are free
            i += 1
            continue
        else:
            last, i = 1, i + 1
        stack[-1][1] += last
        if stack[-1][1] > MAX_UNITS:
            raise SchemaTooCostlyError(f"{path} expands to more than {MAX_UNITS} repetitions")
    if len(stack) != 1:
        raise SchemaTooCostlyError(f"{path} has an unbalanced '('")
    best, cur = stack[0]
    return max(best, cur)
