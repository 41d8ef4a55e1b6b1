"""Log probabilities through a real node (edge) and a real member server, driven by the openai SDK."""

from __future__ import annotations

import math
from typing import Any

import httpx
import openai
import pytest

from bench.llamaref import reference_llama

pytestmark = pytest.mark.slow

PROMPT = "1, 2, 3, 4,"
ASK = [{"role": "user", "content": "Count from one to five."}]


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _check_chat(content: str, entries: list[Any], top: int) -> None:
    assert "".join(e.token for e in entries) == content
    for e in entries:
        assert e.logprob <= 0.0 and bytes(e.bytes) == e.token.encode()
        assert len(e.top_logprobs) == top
        values = [t.logprob for t in e.top_logprobs]
        assert values == sorted(values, reverse=True) and sum(math.exp(v) for v in values) <= 1.0 + 1e-6
        # Greedy: the chosen token is the most likely one.
        assert (e.top_logprobs[0].token, e.top_logprobs[0].logprob) == (e.token, e.logprob)


def test_chat_logprobs_whole_and_streamed_agree(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {"model": "edge", "messages": ASK, "temperature": 0, "max_tokens": 16, "logprobs": True, "top_logprobs": 3}
    whole = client.chat.completions.create(**kwargs).choices[0]
    assert whole.logprobs is not None and whole.logprobs.content
    _check_chat(whole.message.content or "", whole.logprobs.content, 3)
    streamed: list[Any] = []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if chunk.choices and chunk.choices[0].logprobs is not None:
            streamed.extend(chunk.choices[0].logprobs.content or ())
    assert [(e.token, round(e.logprob, 5)) for e in streamed] == [(e.token, round(e.logprob, 5)) for e in whole.logprobs.content]


def test_without_logprobs_there_are_none_and_the_cache_is_not_asked(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model="edge", messages=ASK, temperature=0, max_tokens=8)
    assert plain.choices[0].logprobs is None
    raw = client.chat.completions.with_raw_response.create(
        model="edge", messages=ASK, temperature=0, max_tokens=8, logprobs=True
    )
    assert raw.headers["x-edgeroute-route"] == "edge"  # the same question again, but a stored answer has no logprobs
    assert raw.parse().choices[0].logprobs.content[0].top_logprobs == []  # type: ignore[union-attr]


def test_legacy_completion_logprobs_line_up_with_the_text(client: openai.OpenAI) -> None:
    done = client.completions.create(model="edge", prompt=PROMPT, temperature=0, max_tokens=8, logprobs=2).choices[0]
    lp = done.logprobs
    assert lp is not None and "".join(lp.tokens or []) == done.text
    assert lp.text_offset == [sum(len(t) for t in (lp.tokens or [])[:i]) for i in range(len(lp.tokens or []))]
    for token, value, top in zip(lp.tokens or [], lp.token_logprobs or [], lp.top_logprobs or [], strict=True):
        assert len(top) == 2 and max(top.values()) == value and top[token] == value


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"messages": ASK, "top_logprobs": 2}, None, "needs logprobs"),
        ({"messages": ASK, "logprobs": True, "top_logprobs": 21}, "top_logprobs", "less than or equal to 20"),
    ],
)
def test_bad_logprobs_requests_are_400(node_url: str, body: dict[str, Any], param: str | None, says: str) -> None:
    response = httpx.post(node_url + "/v1/chat/completions", json={"model": "edge", "max_tokens": 4, **body}, timeout=60)
    assert response.status_code == 400 and says in response.json()["error"]["message"]


def test_the_edge_agrees_with_llama_cpps_own_logprobs() -> None:
    """Same model, same prompt, greedy: the same tokens and alternatives as ``llama_cpp.Llama``
    reports, and values within the edge's quantized-KV, flash-attention difference."""
    import asyncio

    from edge import EdgeSettings, LlamaEngine
    from models import EDGE_DEFAULT, GenerationRequest, SamplingParams, collect, default_models_dir, resolve

    path = str(resolve(EDGE_DEFAULT, default_models_dir()).path)
    ref = reference_llama(model_path=path, logits_all=True, verbose=False, n_ctx=256, n_threads=1)
    theirs = ref.create_completion(PROMPT, max_tokens=6, temperature=0, logprobs=3)["choices"][0]["logprobs"]

    async def ours() -> Any:
        engine = LlamaEngine(resolve(EDGE_DEFAULT, default_models_dir()), EdgeSettings(n_ctx=256, slots=1))
        try:
            params = SamplingParams(temperature=0.0, max_tokens=6, logprobs=3)
            return (await collect(engine.stream(GenerationRequest(params=params, prompt=PROMPT)))).logprobs
        finally:
            await engine.aclose()

    mine = asyncio.run(ours())
    assert [e.token for e in mine] == theirs["tokens"]
    for e, value, top in zip(mine, theirs["token_logprobs"], theirs["top_logprobs"], strict=True):
        assert [t.token for t in e.top] == list(top)
        assert abs(e.logprob - value) < 0.1


def test_echo_repeats_the_prompt_before_the_completion(client: openai.OpenAI, node_url: str) -> None:
    plain = client.completions.create(model="edge", prompt=PROMPT, temperature=0, max_tokens=6).choices[0].text
    echoed = client.completions.create(model="edge", prompt=PROMPT, temperature=0, max_tokens=6, echo=True).choices[0].text
    assert echoed == PROMPT + plain
    streamed = "".join(
        c.choices[0].text for c in client.completions.create(model="edge", prompt=PROMPT, temperature=0, max_tokens=6, echo=True, stream=True)
        if c.choices
    )
    assert streamed == PROMPT + plain
    refused = httpx.post(
        node_url + "/v1/completions", json={"model": "edge", "prompt": PROMPT, "echo": True, "logprobs": 1, "max_tokens": 2}, timeout=60
    )
    assert refused.status_code == 400 and "prompt's log probabilities" in refused.json()["error"]["message"]
