"""llama.cpp's server's own /completion body (models.llamacpp): the OpenAI text completion it
asks for, and the answers the writer sends."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from models import TokenLogprob, Usage
from models.llamacpp import LlamaCompletionBody, LlamaCppWriter


def test_a_bare_prompt_gets_llama_cpp_s_sampler_and_no_cap() -> None:
    body = LlamaCompletionBody.model_validate({"prompt": "Once"})
    assert body.openai_fields() == {
        "model": "auto", "prompt": "Once", "stream": False, "n": 1,
        "temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0,
    }


def test_its_fields_become_the_openai_ones() -> None:
    body = LlamaCompletionBody.model_validate({
        "prompt": "Once", "model": "edge", "n_predict": 16, "stream": True, "stop": ["\n"], "temperature": 0,
        "top_k": 5, "repeat_penalty": 1.2, "presence_penalty": 0.5, "seed": 7, "n_probs": 3,
        "json_schema": {"type": "object"}, "logit_bias": [[15, 2.5], [16, False]], "cache_prompt": True,
    })
    assert body.openai_fields() == {
        "cache_prompt": True, "model": "edge", "prompt": "Once", "stream": True, "n": 1, "temperature": 0, "top_k": 5,
        "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.2, "max_tokens": 16, "stop": ["\n"], "seed": 7,
        "presence_penalty": 0.5, "logprobs": 3, "logit_bias": {"15": 2.5, "16": -100.0},
        "response_format": {"type": "json_schema", "json_schema": {"name": "json_schema", "schema": {"type": "object"}}},
    }
    assert LlamaCompletionBody.model_validate({"prompt": "x", "logit_bias": {"15": -1}}).bias() == {"15": -1.0}


@pytest.mark.parametrize("seed", [-1, 0xFFFFFFFF])
def test_llama_cpp_s_random_seeds_leave_the_seed_out(seed: int) -> None:
    assert "seed" not in LlamaCompletionBody.model_validate({"prompt": "x", "seed": seed}).openai_fields()


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"prompt": [1, "b", 3]}, "prompt"),
        ({"prompt": [[1], [2]]}, "prompt"),
        ({"prompt": ["a", "b"]}, "prompt"),
        ({"n_predict": 0}, "n_predict"),
        ({"grammar": "root ::= \"a\""}, "grammar"),
        ({"return_tokens": True}, "return_tokens"),
        ({"n_probs": -1}, "n_probs"),
    ],
)
def test_what_it_cannot_do_is_refused(extra: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        LlamaCompletionBody.model_validate({"prompt": "x", **extra})
    assert field in str(caught.value)


def _events(raw: bytes) -> list[dict[str, object]]:
    assert raw.startswith(b"data: ") and raw.endswith(b"\n\n")
    return [json.loads(part.removeprefix(b"data: ")) for part in raw.strip().split(b"\n\n")]


def test_a_stream_sends_pieces_then_the_record_and_no_done() -> None:
    writer = LlamaCppWriter("edge", "Once", {"n_ctx": 8}, probs=True)
    assert writer.opening() == b""
    entry = TokenLogprob(" upon", -0.5, b" upon", (TokenLogprob(" upon", -0.5, b" upon"),))
    [piece] = _events(writer.text(" upon", [entry]))
    assert (piece["content"], piece["stop"], piece["tokens_predicted"]) == (" upon", False, 1)
    assert piece["completion_probabilities"] == [
        {"token": " upon", "logprob": -0.5, "bytes": list(b" upon"), "top_logprobs": [{"token": " upon", "logprob": -0.5, "bytes": list(b" upon")}]}
    ]
    [last] = _events(writer.finish("length", Usage(2, 1)))
    assert (last["stop"], last["content"], last["stop_type"], last["tokens_predicted"], last["tokens_evaluated"]) == (True, "", "limit", 1, 2)
    assert (last["prompt"], last["generation_settings"], last["model"]) == ("Once", {"n_ctx": 8}, "edge")
    assert "completion_probabilities" not in last and b"[DONE]" not in writer.finish("stop", Usage(2, 1))


def test_a_whole_answer_is_the_record_with_the_text() -> None:
    writer = LlamaCppWriter("edge", "Say", {})
    body = writer.whole("hi\nthere", "stop", Usage(3, 2))
    assert (body["content"], body["stop"], body["stop_type"], body["has_new_line"]) == ("hi\nthere", True, "eos", True)
    assert body["timings"]["predicted_n"] == 2 and body["timings"]["prompt_n"] == 3
    assert "completion_probabilities" not in body
    assert _events(writer.error("boom")) == [{"error": {"code": 500, "message": "boom", "type": "server_error"}}]


def test_a_stop_word_is_stop_type_word_with_its_stopping_word() -> None:
    whole = LlamaCppWriter("edge", "Count", {}).whole("1, 2", "stop", Usage(2, 3), stop_word=", 3")
    assert (whole["stop_type"], whole["stopping_word"], whole["content"]) == ("word", ", 3", "1, 2")
    [last] = _events(LlamaCppWriter("edge", "Count", {}).finish("stop", Usage(2, 3), stop_word=", 3"))
    assert (last["stop_type"], last["stopping_word"]) == ("word", ", 3")
    eos = LlamaCppWriter("edge", "Count", {}).whole("1, 2", "stop", Usage(2, 3))
    assert (eos["stop_type"], eos["stopping_word"]) == ("eos", "")
    # A length cut is a limit whatever text it ended on.
    cut = LlamaCppWriter("edge", "Count", {}).whole("1, 2", "length", Usage(2, 3))
    assert (cut["stop_type"], cut["stopping_word"]) == ("limit", "")
