"""Ollama's native API (``/api``) through a real node (the real edge model and embedder), driven
by Ollama's own Python client: the same answers as ``/v1`` for the same request, whole and
streamed as JSON lines, structured output, log probabilities, embeddings, the model listings,
the cache shared with ``/v1``, keys, Ollama's error shape, and a stream a cloud member breaks
finished on the edge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import ollama
import openai
import pytest

from models import EMBEDDING_DEFAULT
from tests.cloud.cloud_servers import chat_chunk, sse
from tests.router.hybrid_helpers import ASK, RecordingServer, decisions, node

pytestmark = pytest.mark.slow

GREEDY = {"temperature": 0, "num_predict": 12}
NO_CACHE = {"cache": False}  # an unknown field passes on to the OpenAI request, as on /v1
# Ollama's sampler defaults, which an Ollama request without options gets: the same on /v1.
OLLAMA_SAMPLER = {"top_p": 0.9, "top_k": 40, "min_p": 0.0, "repeat_penalty": 1.1}


@pytest.fixture()
def client(node_url: str) -> ollama.Client:
    # Every answer from an engine: the switch as a header (Ollama's client sends no unknown fields).
    return ollama.Client(host=node_url, timeout=120, headers={"x-edgeroute-cache": "false"})


@pytest.fixture()
def oai(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _chat(client: ollama.Client, ask: str, **kwargs: Any) -> Any:
    return client.chat(model="edge", messages=[{"role": "user", "content": ask}], **kwargs)


def test_a_chat_is_the_v1_answer_to_the_same_request(client: ollama.Client, oai: openai.OpenAI) -> None:
    ask = "Name three primary colors."
    mine = client.chat(
        model="smollm2-135m-instruct:latest", stream=False, options=GREEDY,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": ask}],
    )
    theirs = oai.chat.completions.create(
        model="smollm2-135m-instruct", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": ask}],
        temperature=0, max_tokens=12, extra_body={**NO_CACHE, **OLLAMA_SAMPLER},
    )
    assert mine.model == "smollm2-135m-instruct:latest" and mine.done
    assert mine.message.role == "assistant" and mine.message.content == theirs.choices[0].message.content
    assert theirs.usage is not None
    assert (mine.prompt_eval_count, mine.eval_count) == (theirs.usage.prompt_tokens, theirs.usage.completion_tokens)
    assert mine.done_reason == theirs.choices[0].finish_reason
    assert mine.total_duration is not None and mine.total_duration > 0 and mine.load_duration == 0


def test_a_streamed_chat_adds_up_to_the_whole_one(client: ollama.Client) -> None:
    ask = "What is the capital of France?"
    whole = _chat(client, ask, stream=False, options=GREEDY)
    parts = list(_chat(client, ask, stream=True, options=GREEDY))
    assert len(parts) >= 3 and [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    last = parts[-1]
    assert (last.message.content, last.done_reason, last.eval_count) == ("", whole.done_reason, whole.eval_count)
    assert last.prompt_eval_count == whole.prompt_eval_count


def test_the_stream_is_json_lines_and_streams_by_default(node_url: str) -> None:
    body = {"model": "edge", "messages": [{"role": "user", "content": "Say hi."}], "options": GREEDY, **NO_CACHE}
    with httpx.stream("POST", node_url + "/api/chat", json=body, timeout=120) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
        assert answer.headers["x-edgeroute-route"] == "edge" and answer.headers["x-request-id"]
        lines = [json.loads(line) for line in answer.iter_lines() if line]
    assert len(lines) > 1 and lines[-1]["done"] is True and not any(line["done"] for line in lines[:-1])


def test_raw_generate_is_the_text_completion_and_templated_generate_the_chat(client: ollama.Client, oai: openai.OpenAI) -> None:
    raw = client.generate(model="edge", prompt="Once upon a time", raw=True, options=GREEDY, stream=False)
    text = oai.completions.create(
        model="edge", prompt="Once upon a time", temperature=0, max_tokens=12, extra_body={**NO_CACHE, **OLLAMA_SAMPLER}
    )
    assert raw.response == text.choices[0].text and raw.done and raw.context is None
    templated = client.generate(model="edge", system="Be brief.", prompt="What is 2+2?", options=GREEDY, stream=False)
    chat = client.chat(
        model="edge", stream=False, options=GREEDY,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
    )
    assert templated.response == chat.message.content
    streamed = client.generate(model="edge", system="Be brief.", prompt="What is 2+2?", options=GREEDY, stream=True)
    assert "".join(p.response for p in streamed) == templated.response


def test_more_stop_strings_than_openai_s_four_are_taken_as_ollama_takes_them(client: ollama.Client) -> None:
    free = client.generate(model="edge", prompt="One, two, three,", raw=True, options=GREEDY, stream=False).response
    words = free.split()
    assert len(words) >= 2, free
    stops = [f"<never-{i}>" for i in range(11)] + [words[1]]  # twelve, the last one reached
    cut = client.generate(model="edge", prompt="One, two, three,", raw=True, options={**GREEDY, "stop": stops}, stream=False)
    assert (cut.response, cut.done_reason) == (free[: free.find(words[1])], "stop")
    chat = _chat(client, "Name two colours.", stream=False, options={**GREEDY, "stop": stops})
    assert chat.done_reason in ("stop", "length")


def test_num_predict_cuts_the_answer_and_says_so(client: ollama.Client) -> None:
    cut = _chat(client, "Tell me a long story.", stream=False, options={"num_predict": 3})
    assert (cut.done_reason, cut.eval_count) == ("length", 3) and cut.message.content


def test_a_schema_format_gets_matching_json(client: ollama.Client) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"], "additionalProperties": False}
    answer = _chat(client, "Which city is the capital of Italy?", stream=False, format=schema, options={"temperature": 0, "num_predict": 40})
    parsed = json.loads(answer.message.content)
    assert list(parsed) == ["city"] and isinstance(parsed["city"], str)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}}, "required": ["city"]},
    },
}


@pytest.mark.parametrize("ask", ["Is it raining in Berlin today?", "What is the capital of France?"])
def test_given_tools_the_model_calls_one_or_replies_the_same_whole_and_streamed(client: ollama.Client, ask: str) -> None:
    kwargs: dict[str, Any] = {"tools": [WEATHER], "options": {"temperature": 0, "num_predict": 40}}
    whole = _chat(client, ask, **kwargs)
    lines = list(_chat(client, ask, stream=True, **kwargs))
    calls = [c for line in lines for c in line.message.tool_calls or ()]
    streamed = ("".join(line.message.content or "" for line in lines), [(c.function.name, dict(c.function.arguments)) for c in calls])
    if whole.message.tool_calls:
        [call] = whole.message.tool_calls
        assert call.function.name == "get_weather" and list(call.function.arguments) == ["city"]
        assert whole.message.content == "" and whole.done_reason == "stop"
    else:
        assert whole.message.content and not whole.message.content.startswith('{"response"')
    assert streamed == (whole.message.content, [(c.function.name, dict(c.function.arguments)) for c in whole.message.tool_calls or ()])
    assert lines[-1].done and not any(line.done for line in lines[:-1])


def test_log_probabilities_come_with_each_token(client: ollama.Client) -> None:
    answer = _chat(client, "Say hello.", stream=False, options=GREEDY, logprobs=True, top_logprobs=2)
    assert answer.logprobs is not None and len(answer.logprobs) == answer.eval_count
    assert "".join(lp.token for lp in answer.logprobs) == answer.message.content
    assert all(len(lp.top_logprobs or ()) == 2 and lp.logprob <= 0 for lp in answer.logprobs)


def test_embed_gives_the_node_embedders_vectors(client: ollama.Client, node_app) -> None:  # type: ignore[no-untyped-def]
    texts = ["A cat sits on the mat.", "A kitten rests on a rug."]
    got = client.embed(model=EMBEDDING_DEFAULT + ":latest", input=texts)
    embedder = node_app.state.node.embedder
    vecs = np.asarray(got.embeddings, dtype=np.float32)
    np.testing.assert_array_equal(vecs, np.stack([embedder.embed_batch([t])[0] for t in texts]))
    assert got.prompt_eval_count == sum(embedder.count_tokens(texts))
    older = client.embeddings(model=EMBEDDING_DEFAULT, prompt=texts[0])
    np.testing.assert_array_equal(np.asarray(older.embedding, dtype=np.float32), vecs[0])
    assert client.embed(model=EMBEDDING_DEFAULT, input=[]).embeddings == []
    with pytest.raises(ollama.ResponseError) as caught:
        client.embed(model=EMBEDDING_DEFAULT, input="word " * 400, truncate=False)
    assert caught.value.status_code == 400 and "truncate is false" in caught.value.error
    assert len(client.embed(model=EMBEDDING_DEFAULT, input="word " * 400).embeddings[0]) == 384


def test_the_listings_name_what_a_client_may_ask_for(client: ollama.Client, node_app) -> None:  # type: ignore[no-untyped-def]
    node = node_app.state.node
    listed = {m.model: m for m in client.list().models}
    assert set(listed) == {f"{m}:latest" for m in [*node.model_ids(), EMBEDDING_DEFAULT]}
    edge = listed[node.edge_model + ":latest"]
    assert edge.size == node.edge.spec.path.stat().st_size and edge.digest == node.edge.spec.sha256
    assert edge.details is not None and (edge.details.format, edge.details.quantization_level) == ("gguf", "Q4_1")
    assert {m.model for m in client.ps().models} == {node.edge_model + ":latest", EMBEDDING_DEFAULT + ":latest"}
    shown = client.show(node.edge_model)
    assert shown.capabilities == ["completion"] and shown.modelinfo is not None
    assert shown.modelinfo[f"{edge.details.family}.context_length"] == node.settings.edge.n_ctx
    assert client.show(EMBEDDING_DEFAULT).capabilities == ["embedding"]
    assert httpx.get(client._client.base_url.join("/api/version"), timeout=10).json()["version"]


def test_an_empty_conversation_loads_the_model(client: ollama.Client) -> None:
    assert (answer := client.chat(model="edge", messages=[])).done_reason == "load" and answer.done
    assert client.generate(model="edge", prompt="", keep_alive=0).done_reason == "unload"


def test_a_v1_answer_in_the_cache_answers_the_same_ollama_request(node_url: str) -> None:
    ask = "Which planet is known as the red planet? (ollama cache test)"
    first = httpx.post(node_url + "/v1/chat/completions", json={"model": "edge", "messages": [{"role": "user", "content": ask}], "temperature": 0, "max_tokens": 6, **OLLAMA_SAMPLER}, timeout=120)
    again = httpx.post(node_url + "/api/chat", json={"model": "edge", "messages": [{"role": "user", "content": ask}], "options": {"temperature": 0, "num_predict": 6}, "stream": False}, timeout=120)
    assert (first.status_code, again.status_code) == (200, 200)
    assert [first.headers["x-edgeroute-route"], again.headers["x-edgeroute-route"]] == ["edge", "cache-exact"]
    assert again.json()["message"]["content"] == first.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/api/chat", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "'nope' does not exist"),
        ("/api/chat", {"model": "edge", "messages": [{"role": "user", "content": "x"}], "options": {"temperature": 5}}, 400, "options.temperature"),
        ("/api/chat", {"model": "edge", "messages": [{"role": "user", "content": "x"}], "think": True}, 400, "thinking"),
        ("/api/chat", {"model": "edge", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, 400, "images"),
        ("/api/chat", {"model": "edge", "messages": [{"role": "user", "content": "x"}], "format": {"type": "object", "properties": 5}}, 400, "format"),
        ("/api/generate", {"model": "edge", "prompt": "x", "suffix": "y"}, 400, "suffix"),
        ("/api/generate", {"model": "edge", "prompt": "x", "options": {"num_predict": 2_000_000}}, 400, "options.num_predict"),
        ("/api/generate", {"model": "edge", "prompt": "x", "options": {"stop": [f"s{i}" for i in range(33)]}}, 400, "options.stop"),
        ("/api/embed", {"model": "nope", "input": "x"}, 404, "embedding model 'nope'"),
        ("/api/show", {"model": "nope"}, 404, "'nope' does not exist"),
    ],
)
def test_errors_come_in_ollamas_shape(node_url: str, path: str, body: dict[str, Any], status: int, says: str) -> None:
    answer = httpx.post(node_url + path, json=body, timeout=30)
    assert answer.status_code == status
    assert list(answer.json()) == ["error"] and says in answer.json()["error"]


def test_a_body_that_is_not_json_or_too_big_is_refused_in_ollamas_shape(node_url: str) -> None:
    answer = httpx.post(node_url + "/api/chat", content=b"{not json", headers={"content-type": "application/json"}, timeout=30)
    assert answer.status_code == 400 and isinstance(answer.json()["error"], str)
    big = httpx.post(node_url + "/api/generate", content=b" " * (5 * 1024 * 1024), headers={"content-type": "application/json"}, timeout=30)
    assert big.status_code == 413 and "bytes" in big.json()["error"]


def test_the_node_s_keys_guard_the_ollama_api(keyed_node: str) -> None:
    for path in ("/api/tags", "/api/version"):
        assert httpx.get(keyed_node + path, timeout=10).status_code == 401
    with pytest.raises(ollama.ResponseError) as caught:
        ollama.Client(host=keyed_node).chat(model="edge", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert caught.value.status_code == 401 and isinstance(caught.value.error, str)
    allowed = ollama.Client(host=keyed_node, headers={"authorization": "Bearer key-a"})
    assert allowed.chat(model="edge", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 2}, stream=False).done


def test_an_ollama_stream_a_member_breaks_is_finished_on_the_edge(tmp_path: Path) -> None:
    stall = RecordingServer([("send", sse(chat_chunk("A hash map"))), ("send", sse(chat_chunk(" stores"))), ("sleep", 30)])
    try:
        with node(tmp_path, [stall.settings("stall")]) as (base, app):
            parts = list(ollama.Client(host=base, timeout=120).chat(model="cloud", messages=ASK, options={"num_predict": 16, "temperature": 0}, stream=True))
            text = "".join(p.message.content or "" for p in parts)
            assert parts[-1].done and text.startswith("A hash map stores") and text != "A hash map stores"
            assert parts[-1].eval_count is not None and parts[-1].eval_count <= 16
            assert decisions(app)[-1].fallback == "cloud->edge"
    finally:
        stall.close()
