"""A schema's cost read from its own numbers, before any converter expands them."""

from __future__ import annotations

import pytest

from models.schema_bounds import MAX_DEPTH, MAX_UNITS, SchemaTooCostlyError, check_schema, subschemas


@pytest.mark.parametrize(
    ("schema", "units"),
    [
        ({"type": "string", "maxLength": 64}, 64),
        ({"type": "string", "minLength": 3, "maxLength": 10}, 13),
        ({"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 4}, 9),
        ({"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}, 10),
        ({"type": "string", "pattern": "^(ab){3}$"}, 6),
        ({"type": "string", "pattern": "^(a|bcd){2}$"}, 6),
        ({"type": "string", "pattern": "^[a-z]{1,64}@[a-z]{1,64}\\.[a-z]{2,8}$"}, 138),
        ({"type": "string", "pattern": "^[\\]{]{5}$"}, 5),
        ({"properties": {"a": {"maxLength": 2}}, "$defs": {"b": {"maxItems": 3}}, "anyOf": [{"minLength": 4}]}, 9),
        ({"enum": ["\u0000"], "const": "\u0000"}, 0),
        ({"type": "integer"}, 0),
    ],
)
def test_units_are_counted_from_the_schema(schema: dict, units: int) -> None:
    assert check_schema(schema, "schema") == units


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "string", "minLength": 1_000_000_000}, "schema.minLength is 1000000000, over the 8192"),
        ({"type": "array", "maxItems": 2**63}, "schema.maxItems is 9223372036854775808, over the 8192"),
        ({"type": "string", "maxLength": -1}, "schema.maxLength must be a whole number of 0 or more"),
        ({"type": "string", "maxLength": 1.5}, "schema.maxLength must be a whole number"),
        ({"type": "string", "maxLength": "10"}, "schema.maxLength must be a whole number"),
        ({"type": "string", "maxLength": True}, "schema.maxLength must be a whole number"),
        ({"properties": {"a": {"maxLength": 5000}, "b": {"maxLength": 5000}}}, "add up to more than 8192"),
        ({"type": "string", "pattern": "^(a{100}){100}$"}, "schema.pattern expands to more than 8192"),
        ({"type": "string", "pattern": "^a{99999}$"}, "repeats 99999 times"),
        ({"type": "string", "pattern": "^a\\x00$"}, "NUL"),
        ({"type": "string", "pattern": "^a\\u0000$"}, "NUL"),
        ({"type": "string", "pattern": "^a\\0$"}, "NUL"),
        ({"type": "string", "pattern": "^a\u0000$"}, "NUL"),
        ({"type": "string", "pattern": "^a\tb$"}, "raw control character"),
        ({"type": "string", "pattern": "^(a$"}, "unbalanced '('"),
        ({"type": "string", "pattern": "^a)$"}, "unbalanced ')'"),
        ({"type": "string", "pattern": 5}, "schema.pattern must be a string"),
    ],
)
def test_what_no_grammar_should_be_built_for_is_refused(schema: dict, says: str) -> None:
    with pytest.raises(SchemaTooCostlyError, match=says.replace("(", "\\(").replace(")", "\\)")):
        check_schema(schema, "schema")


def test_a_backslash_before_the_zero_is_a_literal_backslash_not_a_nul() -> None:
    assert check_schema({"type": "string", "pattern": "^a\\\\u0000$"}, "schema") > 0


def test_nesting_is_bounded() -> None:
    schema: dict = {"type": "integer"}
    for _ in range(MAX_DEPTH):
        schema = {"type": "array", "items": schema}
    assert check_schema(schema, "schema") == 0
    with pytest.raises(SchemaTooCostlyError, match=f"nested deeper than {MAX_DEPTH}"):
        check_schema({"type": "array", "items": schema}, "schema")


def test_other_schemas_in_the_same_grammar_count() -> None:
    assert check_schema({"maxLength": 100}, "tools[1].function.parameters", spent=MAX_UNITS - 100) == 100
    with pytest.raises(SchemaTooCostlyError, match=r"^tools\[1\]\.function\.parameters: "):
        check_schema({"maxLength": 101}, "tools[1].function.parameters", spent=MAX_UNITS - 100)


def test_subschemas_are_the_schema_objects_not_the_data_in_const_or_enum() -> None:
    schema = {
        "properties": {"a": {"pattern": "p"}},
        "items": [{"type": "string"}],
        "anyOf": [{"minLength": 1}],
        "const": {"pattern": "q"},
        "enum": [{"pattern": "r"}],
    }
    assert list(subschemas(schema)) == [schema, {"pattern": "p"}, {"minLength": 1}, {"type": "string"}]
