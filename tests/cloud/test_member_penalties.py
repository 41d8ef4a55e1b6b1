"""OpenAI's frequency and presence penalties on the member server (real model over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import torch

from cloud.local import LocalMember
from cloud.member.decode import Penalties


def test_each_earlier_use_lowers_a_token_by_frequency_and_any_use_by_presence() -> None:
    penalties = Penalties(0.5, 0.25, [5, 5], n_vocab=10)
    penalties.count(7)
    out = penalties.apply(torch.ones(12, dtype=torch.bfloat16))  # logits past the vocabulary: untouched
    expected = torch.ones(12)
    expected[5] = 1.0 - 2 * 0.5 - 0.25
    expected[7] = 1.0 - 0.5 - 0.25
    assert torch.equal(out, expected)


@pytest.fixture(scope="module")
def http(member: LocalMember) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as client:
        yield client


@pytest.mark.slow
def test_a_frequency_penalty_stops_a_greedy_answer_repeating_itself(http: httpx.Client, member: LocalMember) -> None:
    def words(**penalty: float) -> list[str]:
        body = {"model": member.model, "prompt": "yes, yes, yes, yes, yes,", "max_tokens": 30, "temperature": 0, **penalty}
        resp = http.post("/v1/completions", json=body)
        assert resp.status_code == 200, resp.text
        return str(resp.json()["choices"][0]["text"]).lower().replace(",", " ").split()

    plain, penalized = words(), words(frequency_penalty=2.0)
    top = max(plain.count(w) for w in plain)
    assert top >= 10  # the model does repeat one word, unpenalized
    assert max(penalized.count(w) for w in penalized) < top / 2
    assert len(set(penalized)) > len(set(plain))


@pytest.mark.slow
def test_logit_bias_forces_a_token_and_an_unknown_id_is_a_400(http: httpx.Client, member: LocalMember) -> None:
    from transformers import AutoTokenizer

    from cloud.member.weights import twin_dir
    from models import default_models_dir

    def text(**fields: object) -> httpx.Response:
        body = {"model": member.model, "prompt": "1, 2, 3, 4,", "max_tokens": 3, "temperature": 0, **fields}
        return http.post("/v1/completions", json=body)

    tokenizer = AutoTokenizer.from_pretrained(twin_dir(member.model, default_models_dir()))  # the member's own
    [yes] = tokenizer(" yes", add_special_tokens=False).input_ids
    assert text(logit_bias={str(yes): 100}).json()["choices"][0]["text"] == " yes yes yes"
    refused = text(logit_bias={"99999999": 1})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "logit_bias"
