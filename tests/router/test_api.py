"""The OpenAI-compatible API of a real node, driven by the official openai SDK."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from bench.llamaref import reference_llama

pytestmark = pytest.mark.slow

MSG = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def raw_llama():  # type: ignore[no-untyped-def]
    from models import EDGE_DEFAULT, default_models_dir, resolve

    # The edge runs llama.cpp with flash attention (it keeps greedy output batch-independent),
    # so the reference does too: other attention kernels round differently. Same KV types (q8_0 keys, f16 values).
    llm = reference_llama(
        str(resolve(EDGE_DEFAULT, default_models_dir()).path),
        n_ctx=2048, flash_attn=True, type_k=8, type_v=1, verbose=False,
    )
    yield llm
    llm.close()


def test_chat_completion_equals_raw_llama_cpp(client: openai.OpenAI, raw_llama) -> None:  # type: ignore[no-untyped-def]
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=MSG, temperature=0, max_tokens=20)
    assert raw.headers["x-edgeroute-route"] == "edge"
    done = raw.parse()
    assert done.object == "chat.completion"
    assert done.choices[0].message.role == "assistant"
    # Same model, same template, greedy: the API gives exactly what llama.cpp itself gives.
    ref = raw_llama.create_chat_completion(MSG, temperature=0, max_tokens=20)
    assert done.choices[0].message.content == ref["choices"][0]["message"]["content"]
    assert done.choices[0].finish_reason == ref["choices"][0]["finish_reason"]
    assert done.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    assert done.usage.completion_tokens == ref["usage"]["completion_tokens"]
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens


def test_streamed_chat_matches_non_streamed(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="auto", messages=MSG, temperature=0, max_tokens=20)
    stream = client.chat.completions.create(
        model="auto", messages=MSG, temperature=0, max_tokens=20, stream=True, stream_options={"include_usage": True}
    )
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert "".join(pieces) == whole.choices[0].message.content
    assert len([p for p in pieces if p]) > 1
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens


def test_chunks_arrive_before_the_generation_ends(node_url: str) -> None:
    body = {"prompt": "1, 2, 3, 4,", "max_tokens": 300, "temperature": 0, "stream": True}
    with httpx.stream("POST", node_url + "/v1/completions", json=body, timeout=120) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = resp.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        # The first token is on the wire while the engine is still decoding this very request.
        health = httpx.get(node_url + "/healthz", timeout=10).json()
        assert health["edge"]["running"] == 1
        rest = [line for line in lines if line.startswith("data: ")]
    assert first != "data: [DONE]"
    assert rest[-1] == "data: [DONE]"
    assert sum(1 for line in rest if line == "data: [DONE]") == 1


def test_text_completion_and_stop_sequence(client: openai.OpenAI) -> None:
    done = client.completions.create(model="auto", prompt="1, 2, 3, 4, 5,", temperature=0, max_tokens=40, stop=[" 9"])
    assert done.object == "text_completion"
    assert done.choices[0].text == " 6, 7, 8,"
    assert done.choices[0].finish_reason == "stop"


def test_streamed_stop_sequence_is_never_leaked(client: openai.OpenAI) -> None:
    stream = client.completions.create(
        model="auto", prompt="1, 2, 3, 4, 5,", temperature=0, max_tokens=40, stop=[" 9"], stream=True
    )
    text = "".join(c.choices[0].text for c in stream if c.choices)
    assert text == " 6, 7, 8,"


def test_the_root_says_the_node_runs_and_where_its_apis_are(node_url: str) -> None:
    answer = httpx.get(node_url + "/", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    assert answer.text.startswith("edgeroute is running") and "/v1" in answer.text and "/api" in answer.text
    assert httpx.head(node_url + "/", timeout=10).status_code == 200  # Ollama's CLI's heartbeat


def test_models_lists_the_aliases(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert ids == ["auto", "edge", "cloud", "smollm2-135m-instruct", "all-minilm-l6-v2"]


def test_the_listed_embedding_model_answers_embeddings_and_says_so_to_a_chat(client: openai.OpenAI) -> None:
    assert len(client.embeddings.create(model="all-minilm-l6-v2", input="hi").data[0].embedding) == 384
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="all-minilm-l6-v2", messages=[{"role": "user", "content": "hi"}])
    error = caught.value.body
    assert isinstance(error, dict) and (error["code"], error["param"]) == ("model_not_found", "model")
    assert "'all-minilm-l6-v2' is an embedding model: it answers /v1/embeddings only" in error["message"]


def test_models_retrieve_answers_each_listed_id_and_404s_an_unknown_one(client: openai.OpenAI) -> None:
    for listed in client.models.list():
        got = client.models.retrieve(listed.id)
        assert (got.id, got.object, got.owned_by) == (listed.id, "model", "edgeroute")
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-17")
    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"], error["type"]) == ("model_not_found", "model", "invalid_request_error")
    assert "'gpt-17' does not exist; valid models: auto, edge, cloud" in error["message"]
    # An id with a slash (as cloud ids such as "org/model" have) is one id, not another route.
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("org/gpt-17")
    assert "'org/gpt-17' does not exist" in caught.value.body["message"]  # type: ignore[index]


def test_eight_concurrent_requests_are_all_answered_correctly(node_url: str) -> None:
    async def run() -> tuple[list[str], list[str]]:
        aclient = openai.AsyncOpenAI(base_url=node_url + "/v1", api_key="x", max_retries=0, timeout=300)
        prompts = [f"{i}, {i + 1}, {i + 2}," for i in range(10, 90, 10)]

        async def one(prompt: str) -> str:
            done = await aclient.completions.create(model="auto", prompt=prompt, temperature=0, max_tokens=8)
            return done.choices[0].text

        alone = [await one(p) for p in prompts]
        together = await asyncio.gather(*(one(p) for p in prompts))
        await aclient.close()
        return alone, list(together)

    alone, together = asyncio.run(run())
    assert together == alone
    assert all(text.strip() for text in together)


def test_openapi_schema_is_served(node_url: str) -> None:
    schema = httpx.get(node_url + "/openapi/openapi.json", timeout=10).json()
    assert "/v1/chat/completions" in schema["paths"]
    assert "/v1/completions" in schema["paths"]


def test_every_operation_that_checks_keys_documents_the_wrong_key_throttle(node_url: str) -> None:
    """Wrong keys are throttled per address (429) wherever a key is checked (401)."""
    schema = httpx.get(node_url + "/openapi/openapi.json", timeout=10).json()
    ops = {(path, method): op["responses"] for path, item in schema["paths"].items()
           for method, op in item.items() if isinstance(op, dict) and "responses" in op}
    keyed = [name for name, responses in ops.items() if "401" in responses]
    assert ("/v1/feedback", "post") in keyed and ("/api/tags", "get") in keyed and ("/props", "get") in keyed
    assert [name for name in keyed if "429" not in ops[name]] == []


@pytest.mark.parametrize("path", ["/healthz", "/health"])
def test_healthz(node_url: str, path: str) -> None:
    body = httpx.get(node_url + path, timeout=10).json()
    assert body["status"] == "ok"
    assert body["edge"]["model"] == "smollm2-135m-instruct"


def test_timing_header_is_plausible(client: openai.OpenAI) -> None:
    started = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(model="edge", messages=MSG, temperature=0, max_tokens=4)
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert 0 < float(raw.headers["x-edgeroute-latency-ms"]) <= elapsed_ms


def test_an_edge_only_node_does_not_embed_for_routing(client: openai.OpenAI) -> None:
    # Not cacheable (opted out) on a node without a pool: no embedding can change the route.
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=MSG, temperature=1.0, max_tokens=4, extra_body={"cache": False}
    )
    assert raw.headers["x-edgeroute-route"] == "edge"
    assert raw.headers["x-edgeroute-reason"] == "short-prompt"
    assert "x-edgeroute-complexity" not in raw.headers


def test_repeated_deterministic_request_is_a_cache_hit_per_tenant(node_url: str) -> None:
    body = {"messages": [{"role": "user", "content": "Spell the word cache backwards."}], "temperature": 0, "max_tokens": 12}
    first = httpx.post(node_url + "/v1/chat/completions", json=body, headers={"x-edgeroute-tenant": "a"}, timeout=60)
    again = httpx.post(node_url + "/v1/chat/completions", json=body, headers={"x-edgeroute-tenant": "a"}, timeout=60)
    other = httpx.post(node_url + "/v1/chat/completions", json=body, headers={"x-edgeroute-tenant": "b"}, timeout=60)
    assert first.headers["x-edgeroute-route"] == "edge"
    assert again.headers["x-edgeroute-route"] == "cache-exact"
    assert again.headers["x-edgeroute-similarity"] == "1.0000"
    assert again.json()["choices"][0]["message"]["content"] == first.json()["choices"][0]["message"]["content"]
    assert other.headers["x-edgeroute-route"] == "edge"  # tenant b never sees tenant a's entry
    opted_out = httpx.post(node_url + "/v1/chat/completions", json={**body, "cache": False},
                           headers={"x-edgeroute-tenant": "a"}, timeout=60)
    assert opted_out.headers["x-edgeroute-route"] == "edge"


def _streamed_writes(node_url: str, body: dict[str, object]) -> tuple[bytes, list[bytes]]:
    """The response head and the body's HTTP/1.1 chunks: the server sends one per write."""
    url = urlsplit(node_url)
    payload = json.dumps(body).encode()
    with socket.create_connection((url.hostname, url.port), timeout=120) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: node\r\ncontent-type: application/json\r\n"
                     b"x-edgeroute-tenant: one-write\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n" % len(payload) + payload)
        raw = b""
        while data := sock.recv(65536):
            raw += data
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    writes: list[bytes] = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        if (size := int(size_line, 16)) == 0:
            return head, writes
        writes.append(rest[:size])
        rest = rest[size + 2:]


def _streamed_text(writes: list[bytes]) -> str:
    events = [line[6:] for line in b"".join(writes).decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return "".join(c["delta"].get("content") or "" for e in events[:-1] for c in json.loads(e)["choices"])


def test_a_streamed_cache_hit_goes_out_in_one_write(node_url: str) -> None:
    body = {"messages": [{"role": "user", "content": "Name three colours of the rainbow."}], "temperature": 0,
            "max_tokens": 24, "stream": True}
    head, made = _streamed_writes(node_url, body)
    assert b"x-edgeroute-route: edge" in head.lower() and len(made) > 3  # a generation: a write per piece
    head, hit = _streamed_writes(node_url, body)
    assert b"x-edgeroute-route: cache-exact" in head.lower()
    assert len(hit) == 1  # one write per word cost ~8 ms for a 256-token answer
    assert _streamed_text(hit) == _streamed_text(made) != ""
    assert b"".join(hit).count(b"data: ") > 3  # the same word-sized events, in one write


def test_a_semantic_hit_carries_the_verifier_probability(node_url: str) -> None:
    tenant = {"x-edgeroute-tenant": "verifier-header"}
    ask = {"messages": [{"role": "user", "content": "How do I reset my password?"}], "temperature": 0, "max_tokens": 8}
    first = httpx.post(node_url + "/v1/chat/completions", json=ask, headers=tenant, timeout=60)
    reworded = {**ask, "messages": [{"role": "user", "content": "how can I reset my password"}]}
    again = httpx.post(node_url + "/v1/chat/completions", json=reworded, headers=tenant, timeout=60)
    assert first.headers["x-edgeroute-route"] == "edge" and "x-edgeroute-verifier" not in first.headers
    assert again.headers["x-edgeroute-route"] == "cache-semantic"
    assert 0.0 < float(again.headers["x-edgeroute-verifier"]) < 1.0
    assert again.json()["choices"][0]["message"]["content"] == first.json()["choices"][0]["message"]["content"]
