"""``response_format`` on the edge engine: llama.cpp's grammar sampler over the real INT4 model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import pytest

from edge import EdgeSettings, LlamaEngine, ResponseFormatError
from edge._grammar import _expand_shorthands, gbnf_for
from models import EDGE_DEFAULT, JSON_OBJECT, GenerationRequest, SamplingParams, collect, default_models_dir, resolve

pytestmark = pytest.mark.slow

SCHEMA = json.dumps(
    {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"], "additionalProperties": False},
    sort_keys=True,
    separators=(",", ":"),
)
ASK = ({"role": "user", "content": "What is 2 + 3? Reply in JSON."},)


@pytest.fixture(scope="module")
def engine() -> Iterator[LlamaEngine]:
    eng = LlamaEngine(resolve(EDGE_DEFAULT, default_models_dir()), EdgeSettings(n_ctx=1024, max_queue=8, slots=4))
    yield eng
    asyncio.run(eng.aclose())


def ask(schema: str | None, prefix: str = "", **params: object) -> GenerationRequest:
    sampling = SamplingParams(**{"temperature": 0.0, "max_tokens": 60, "json_schema": schema, **params})  # type: ignore[arg-type]
    return GenerationRequest(params=sampling, messages=ASK, assistant_prefix=prefix)


async def test_a_schema_shapes_greedy_and_sampled_answers(engine: LlamaEngine) -> None:
    for params in ({}, {"temperature": 1.0, "seed": 11}, {"temperature": 1.0, "seed": 12}):
        done = await collect(engine.stream(ask(SCHEMA, **params)))
        value = json.loads(done.text)
        assert done.finish_reason == "stop"
        assert list(value) == ["answer"] and isinstance(value["answer"], int)
        assert done.text == json.dumps(value, separators=(",", ":"))  # compact, as the members write it


async def test_json_object_mode_answers_an_object_where_free_text_does_not(engine: LlamaEngine) -> None:
    free = await collect(engine.stream(ask(None)))
    shaped = await collect(engine.stream(ask(JSON_OBJECT)))
    assert isinstance(json.loads(shaped.text), dict)
    assert shaped.text != free.text


async def test_a_continuation_completes_the_same_json(engine: LlamaEngine) -> None:
    prefix = '{"answer":'  # compact, as both engines write JSON
    done = await collect(engine.stream(ask(SCHEMA, prefix=prefix)))
    value = json.loads(prefix + done.text)
    assert isinstance(value["answer"], int)


async def test_a_continuation_that_breaks_the_schema_is_refused_before_it_runs(engine: LlamaEngine) -> None:
    with pytest.raises(ResponseFormatError) as caught:
        await collect(engine.stream(ask(SCHEMA, prefix='{"question":')))
    assert caught.value.param == "response_format"
    assert engine.load().depth == 0  # no slot or queue place was taken


async def test_a_schema_the_converter_refuses_is_a_request_error(engine: LlamaEngine) -> None:
    with pytest.raises(ResponseFormatError, match="cannot be enforced"):
        await collect(engine.stream(ask('{"type":"wat"}')))
    with pytest.raises(ResponseFormatError, match="over the 32000"):
        gbnf_for('{"maxLength":20000,"type":"string"}')  # llama.cpp's parser would overflow its stack


async def test_properties_come_in_the_schemas_order(engine: LlamaEngine) -> None:
    schema = '{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"]}'
    done = await collect(engine.stream(ask(schema)))
    assert list(json.loads(done.text)) == ["zeta", "alpha"]


def test_the_fast_path_picks_what_masking_everything_would() -> None:
    """Greedy under a grammar: taking the argmax when the grammar allows it, else masking the
    whole vocabulary, gives the same token as masking first (llama.cpp's full path) every time."""
    import llama_cpp
    import numpy as np

    from edge._grammar import Candidates, Constrained, allows, free, grammar_sampler
    from edge._runtime import sampler_chain

    model = llama_cpp.Llama(model_path=str(resolve(EDGE_DEFAULT, default_models_dir()).path), vocab_only=True, verbose=False)
    vocab, n_vocab = model._model.vocab, model.n_vocab()
    gbnf = gbnf_for(SCHEMA)
    candidates = Candidates(n_vocab)
    brace = model.tokenize(b"{", add_bos=False, special=False)[0]
    rng = np.random.default_rng(0)
    for trial in range(20):
        logits = rng.normal(size=n_vocab).astype(np.float32)
        if trial % 2:
            logits[brace] = 50.0  # the argmax is allowed: the fast path keeps it
        fast = Constrained(grammar_sampler(vocab, gbnf), None)
        full = grammar_sampler(vocab, gbnf)
        try:
            token = fast.sample(logits, candidates)
            llama_cpp.llama_sampler_apply(full, candidates.fill(logits).ref)
            assert token == candidates.best()
            assert model.detokenize([token]).startswith(b"{")  # '{' or a token that begins with it
            if trial % 2:
                assert token == brace
        finally:
            free(fast)
            free(full)
    # Sampled: the draw is always one the grammar allows, and the grammar moves on with it.
    for seed in range(5):
        sampled = Constrained(grammar_sampler(vocab, gbnf), sampler_chain(1.0, 1.0, seed, 40, 0.05))
        try:
            first = sampled.sample(rng.normal(size=n_vocab).astype(np.float32), candidates)
            assert model.detokenize([first]).startswith(b"{")
            assert not allows(sampled.grammar, brace)  # after the opening brace comes a key, not another one
        finally:
            free(sampled)


async def test_a_json_answer_parked_for_another_tenant_resumes_with_its_grammar() -> None:
    """Preemption parks a job with its sampler: the grammar state must travel with it, so the
    resumed answer is the same JSON, token for token, as when it ran alone."""
    story = '{"type":"object","properties":{"story":{"type":"string"}},"required":["story"]}'
    engine = LlamaEngine(resolve(EDGE_DEFAULT, default_models_dir()), EdgeSettings(n_ctx=512, slots=2, max_queue=8))

    def req(schema: str | None, key: str, tokens: int, **params: object) -> GenerationRequest:
        sampling = SamplingParams(**{"temperature": 0.0, "max_tokens": tokens, "json_schema": schema, **params})  # type: ignore[arg-type]
        return GenerationRequest(params=sampling, messages=({"role": "user", "content": "Write a long story as JSON."},), fair_key=key)

    try:
        reqs = [req(story, "a", 96), req(story, "a", 96, temperature=0.8, seed=5)]
        expected = [await collect(engine.stream(r)) for r in reqs]
        streams = [engine.stream(r) for r in reqs]
        firsts = [await anext(s) for s in streams]  # a holds both slots
        await asyncio.wait_for(collect(engine.stream(req(None, "b", 4))), 60)
        rest = [await collect(s) for s in streams]
        assert engine.stats().preempted == 1
        assert [f.text + r.text for f, r in zip(firsts, rest, strict=True)] == [e.text for e in expected]
        assert all(e.text.startswith('{"story":"') for e in expected)
    finally:
        await engine.aclose()


async def test_under_a_schema_the_logprobs_are_still_the_models_own(engine: LlamaEngine) -> None:
    shaped = await collect(engine.stream(ask(SCHEMA, logprobs=5, max_tokens=3)))
    free = await collect(engine.stream(ask(None, logprobs=5, max_tokens=3)))
    assert shaped.logprobs[0].token.startswith("{")
    assert shaped.logprobs[0].top == free.logprobs[0].top  # the same step's distribution: the model's own


@pytest.mark.parametrize(
    "literal", ["\u0000", "a\u0000b", "\u0001\u001f", "back\\slash", "line\nbreak", 'quote"d', "\\u0000", "\U0001d518"]
)
async def test_string_literals_are_written_into_the_grammar_as_their_json_text(engine: LlamaEngine, literal: str) -> None:
    # The converter's own escaping left backslashes alone: "\u0000" became a NUL in the grammar
    # (llama.cpp aborts on it) and "\n" a raw newline inside a JSON string.
    schema = json.dumps({"type": "object", "properties": {"k": {"enum": [literal]}}, "required": ["k"]})
    done = await collect(engine.stream(ask(schema)))
    assert json.loads(done.text) == {"k": literal}


@pytest.mark.parametrize("literal", ["back\\slash", 'quote"d', "line\nbreak", "\\u0000", "a\u0000b", "\ue000\\"])
async def test_property_names_and_constants_are_written_as_their_json_text(engine: LlamaEngine, literal: str) -> None:
    # The same literal as a property name, a constant, an object constant's key and a $ref's path;
    # "\ue000" is where the grammar's placeholders come from, so the schema holding one must not
    # confuse them.
    schema = {
        "type": "object",
        "properties": {literal: {"const": literal}, "o": {"const": {literal: [literal]}}, "r": {"$ref": f"#/properties/{literal}"}},
        "required": [literal, "o", "r"],
        "additionalProperties": False,
    }
    done = await collect(engine.stream(ask(json.dumps(schema, ensure_ascii=False), max_tokens=80)))  # as the API writes it
    key = json.dumps(literal)
    assert done.text == f'{{{key}:{key},"o":{json.dumps({literal: [literal]})},"r":{key}}}'
    assert json.loads(done.text) == {literal: literal, "o": {literal: [literal]}, "r": literal}


def test_a_placeholder_character_in_the_schema_is_kept_apart_however_it_is_written() -> None:
    literals = ["\ue000", "\\", "\ue001\n", "\\ue002"]
    escaped, raw = (gbnf_for(json.dumps({"enum": literals}, ensure_ascii=flag)) for flag in (True, False))
    assert escaped == raw
    for literal in literals:  # its JSON text, escaped for the grammar
        assert '"' + json.dumps(literal).replace("\\", "\\\\").replace('"', '\\"') + '"' in raw


def test_a_schema_that_leaves_no_placeholder_free_is_a_request_error() -> None:
    every = "".join(map(chr, range(0xE000, 0xF900)))
    with pytest.raises(ResponseFormatError, match="too many characters") as info:
        gbnf_for(json.dumps({"enum": [every + "\\"]}, ensure_ascii=False))
    assert info.value.param == "response_format"


@pytest.mark.parametrize(
    ("pattern", "says"),
    [("^[\\x00]$", "NUL"), ("^a\\u0000b$", "NUL"), ("^\ud800$", "not valid Unicode"), ("^a\u0001$", "raw control character")],
)
def test_a_grammar_llama_cpp_cannot_hold_is_refused_before_it_is_built(pattern: str, says: str) -> None:
    with pytest.raises(ResponseFormatError, match=says) as info:
        gbnf_for(json.dumps({"type": "string", "pattern": pattern}))
    assert info.value.param == "response_format"


def test_a_nul_inside_a_negated_class_or_starting_a_range_is_kept() -> None:
    # Excluding NUL, or a range that only starts at it, still leaves characters a token can be.
    for pattern in ("^[^\\x00]$", "^[\\x00-\\x41]$"):
        assert "\\x00" in gbnf_for(json.dumps({"type": "string", "pattern": pattern}))


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("^\\d{3}-\\d{4}$", "^[0-9]{3}-[0-9]{4}$"),
        ("^\\w+\\s\\w+$", "^[0-9A-Za-z_]+[ ][0-9A-Za-z_]+$"),
        ("^[\\d.]+$", "^[0-9.]+$"),
        ("^[^\\d]$", "^[^0-9]$"),
        ("^\\D\\W\\S$", '^[^0-9"\\\\\\x00-\\x1F][^0-9A-Za-z_"\\\\\\x00-\\x1F][^ "\\\\\\x00-\\x1F]$'),
        ("^a\\\\d\\.$", "^a\\\\d\\.$"),  # an escaped backslash, then a plain d
    ],
)
def test_shorthand_classes_are_written_out_for_the_converter(pattern: str, expanded: str) -> None:
    assert _expand_shorthands(pattern) == expanded


def test_a_negated_shorthand_inside_a_class_is_a_request_error() -> None:
    with pytest.raises(ResponseFormatError) as info:
        gbnf_for(json.dumps({"type": "string", "pattern": "^[\\Da]$"}))
    assert info.value.param == "response_format"
    # said once, as raised: not wrapped in the converter's generic refusal
    assert info.value.message == "response_format: a pattern's \\D inside [...] is not supported; write its characters out"


@pytest.mark.parametrize(("pattern", "full"), [("^\\d{3}-\\d{4}$", r"\d{3}-\d{4}"), ("^\\w{2,8}\\s\\d{1,3}$", r"\w{2,8} \d{1,3}")])
async def test_an_answer_under_a_shorthand_pattern_matches_it(engine: LlamaEngine, pattern: str, full: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}, "required": ["v"]}
    done = await collect(engine.stream(ask(json.dumps(schema), max_tokens=40)))
    assert re.fullmatch(full, json.loads(done.text)["v"])
