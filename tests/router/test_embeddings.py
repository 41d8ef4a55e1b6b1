"""``POST /v1/embeddings`` of a real node, driven by the official openai SDK."""

from __future__ import annotations

import base64
import json
import socket
import time
from types import SimpleNamespace
from urllib.parse import urlsplit

import httpx
import numpy as np
import openai
import pytest

from models import EMBEDDING_DEFAULT
from router.errors import InvalidRequestError
from router.limits import LimitSettings, check_texts
from router.node import Node

TEXTS = ["How do I reset my password?", "How can I reset my password?", "Best pizza in Rome"]


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.mark.slow
def test_the_sdk_gets_the_node_embedders_vectors_in_order(client: openai.OpenAI, node_app) -> None:  # type: ignore[no-untyped-def]
    raw = client.embeddings.with_raw_response.create(model=EMBEDDING_DEFAULT, input=TEXTS)
    assert raw.headers["x-request-id"]
    got = raw.parse()  # the SDK asked for base64 and decoded it
    assert got.object == "list" and got.model == EMBEDDING_DEFAULT
    assert [d.index for d in got.data] == [0, 1, 2]
    vecs = np.asarray([d.embedding for d in got.data], dtype=np.float32)
    assert vecs.shape == (3, 384)
    embedder = node_app.state.node.embedder
    # Each text in its own model run, so the node's answer is bit for bit the text's own vector.
    np.testing.assert_array_equal(vecs, np.stack([embedder.embed_batch([t])[0] for t in TEXTS]))
    assert vecs[0] @ vecs[1] > 0.9 > 0.3 > vecs[0] @ vecs[2]
    assert got.usage.prompt_tokens == got.usage.total_tokens == sum(embedder.count_tokens(TEXTS))
    assert got.usage.prompt_tokens == 24  # 9 + 9 + 6 with [CLS] and [SEP]


@pytest.mark.slow
def test_float_and_base64_encode_the_same_vector(node_url: str) -> None:
    url = node_url + "/v1/embeddings"
    floats = httpx.post(url, json={"model": EMBEDDING_DEFAULT, "input": TEXTS[0]}, timeout=60).json()
    b64 = httpx.post(url, json={"model": EMBEDDING_DEFAULT, "input": [TEXTS[0]], "encoding_format": "base64",
                                "dimensions": 384}, timeout=60).json()
    assert len(floats["data"]) == 1 and len(floats["data"][0]["embedding"]) == 384
    decoded = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(np.asarray(floats["data"][0]["embedding"], dtype=np.float32), decoded)
    assert abs(float(np.linalg.norm(decoded)) - 1.0) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "status", "param", "says"),
    [
        ({"model": "text-embedding-3-small", "input": "hi"}, 404, "model", "valid embedding models: all-minilm-l6-v2"),
        ({"model": EMBEDDING_DEFAULT, "input": ""}, 400, "input", "empty string"),
        ({"model": EMBEDDING_DEFAULT, "input": ["a", ""]}, 400, "input", "empty string"),
        ({"model": EMBEDDING_DEFAULT, "input": []}, 400, "input", ""),
        ({"model": EMBEDDING_DEFAULT, "input": [101, 7592, 102]}, 400, "input", "token ids are not accepted"),
        ({"model": EMBEDDING_DEFAULT, "input": [[101, 7592]]}, 400, "input", "token ids are not accepted"),
        ({"model": EMBEDDING_DEFAULT, "input": ["x"] * 2049}, 400, "input", ""),
        ({"model": EMBEDDING_DEFAULT, "input": "hi", "dimensions": 128}, 400, "dimensions", "must be 384"),
        ({"model": EMBEDDING_DEFAULT, "input": "hi", "encoding_format": "int8"}, 400, "encoding_format", ""),
        ({"input": "hi"}, 400, "model", ""),
    ],
)
def test_bad_requests_get_an_openai_error(node_url: str, body: dict, status: int, param: str, says: str) -> None:
    resp = httpx.post(node_url + "/v1/embeddings", json=body, timeout=60)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and says in error["message"]
    assert error["type"] == "invalid_request_error"


@pytest.mark.slow
def test_the_sdk_raises_not_found_for_another_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model="auto", input="hi")
    assert caught.value.body["code"] == "model_not_found"  # type: ignore[index]


# ~150 tokens: a model run of tens of milliseconds, so 2,048 of them take over a minute here.
LONG = "The committee reviewed the quarterly figures, the staffing plan and the budget for next year. " * 6


@pytest.mark.slow
def test_a_client_that_leaves_stops_its_embeddings(node_url: str, node_app) -> None:  # type: ignore[no-untyped-def]
    embedder = node_app.state.node.embedder
    texts = [f"{i}. {LONG}" for i in range(2048)]
    body = json.dumps({"model": EMBEDDING_DEFAULT, "input": texts}).encode()
    url = urlsplit(node_url)
    before = embedder.texts
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nhost: node\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode() + body
        )
        deadline = time.monotonic() + 120
        while embedder.texts == before:  # the work has begun
            assert time.monotonic() < deadline, "the embedder never started"
            time.sleep(0.01)
    left = embedder.texts - before  # the client has gone
    # A text sent now queues behind whatever is still queued: answered, it shows what was left.
    probe = httpx.post(node_url + "/v1/embeddings", json={"model": EMBEDDING_DEFAULT, "input": "hi"}, timeout=600)
    assert probe.status_code == 200
    embedded = embedder.texts - before - 1
    # At most the model runs that were already under way (one batch); never the 2,048.
    assert embedded <= left + embedder.max_batch, (left, embedded)
    assert embedded < 2048


def test_inputs_are_capped_each_and_together() -> None:
    limits = LimitSettings(max_message_chars=10, max_total_chars=15)
    check_texts(["a" * 10, "b" * 5], limits, "input")
    with pytest.raises(InvalidRequestError) as one:
        check_texts(["a" * 5, "b" * 11], limits, "input")
    assert one.value.param == "input.1" and one.value.code == "string_above_max_length"
    with pytest.raises(InvalidRequestError) as alone:
        check_texts(["a" * 11], limits, "input")
    assert alone.value.param == "input"
    with pytest.raises(InvalidRequestError) as total:
        check_texts(["a" * 10, "b" * 6], limits, "input")
    assert total.value.param == "input" and "16 characters (at most 15)" in total.value.message


def test_a_node_without_its_embedder_says_so() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        Node.embedding_model(SimpleNamespace(embedder=None), EMBEDDING_DEFAULT)  # type: ignore[arg-type]
    assert caught.value.code == "model_not_found" and "serves no embeddings" in caught.value.message
