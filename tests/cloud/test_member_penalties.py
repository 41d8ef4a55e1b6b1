"""OpenAI's frequency and presence penalties on the member server (real model over HTTP), and
the sampler extensions it reads as vLLM and llama.cpp's server do: repeat_penalty, top_k, min_p."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import torch

from cloud.local import LocalMember
from cloud.member.decode import Penalties, Repeat, choose_token


def test_each_earlier_use_lowers_a_token_by_frequency_and_any_use_by_presence() -> None:
    penalties = Penalties(0.5, 0.25, [5, 5], n_vocab=10)
    penalties.count(7)
    out = penalties.apply(torch.ones(12, dtype=torch.bfloat16))  # logits past the vocabulary: untouched
    expected = torch.ones(12)
    expected[5] = 1.0 - 2 * 0.5 - 0.25
    expected[7] = 1.0 - 0.5 - 0.25
    assert torch.equal(out, expected)


def test_the_repeat_penalty_divides_a_recent_positive_logit_and_multiplies_a_negative_one() -> None:
    repeat = Repeat(2.0, [3] + [9] * 62 + [5])  # token 3 opened a prompt longer than the window
    repeat.count(7)
    out = repeat.apply(torch.tensor([1.0] * 10 + [1.0]).index_put_((torch.tensor([7]),), torch.tensor(-1.0)))
    expected = torch.ones(11)
    expected[5], expected[7], expected[9] = 0.5, -2.0, 0.5
    assert torch.equal(out, expected)


def test_top_k_1_and_min_p_1_pick_the_most_likely_token_whatever_the_seed() -> None:
    logits = torch.tensor([0.0, 2.0, 1.9, 1.8, 0.5])
    for seed in range(20):
        assert choose_token(logits, 2.0, 1.0, torch.Generator().manual_seed(seed), top_k=1) == 1
        assert choose_token(logits, 2.0, 1.0, torch.Generator().manual_seed(seed), min_p=1.0) == 1
    picked = {choose_token(logits, 2.0, 1.0, torch.Generator().manual_seed(seed), top_k=3) for seed in range(60)}
    assert picked == {1, 2, 3}  # only the three most likely, each of them sometimes
    wide = {choose_token(logits, 2.0, 1.0, torch.Generator().manual_seed(seed), min_p=0.0) for seed in range(200)}
    assert wide == {0, 1, 2, 3, 4}


@pytest.fixture(scope="module")
def http(member: LocalMember) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as client:
        yield client


@pytest.mark.slow
@pytest.mark.parametrize("penalty", [{"frequency_penalty": 2.0}, {"repetition_penalty": 1.5}])  # OpenAI's; vLLM's
def test_a_penalty_stops_a_greedy_answer_repeating_itself(
    http: httpx.Client, member: LocalMember, penalty: dict[str, float]
) -> None:
    def words(**penalty: float) -> list[str]:
        body = {"model": member.model, "prompt": "yes, yes, yes, yes, yes,", "max_tokens": 30, "temperature": 0, **penalty}
        resp = http.post("/v1/completions", json=body)
        assert resp.status_code == 200, resp.text
        return str(resp.json()["choices"][0]["text"]).lower().replace(",", " ").split()

    plain, penalized = words(), words(**penalty)
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
