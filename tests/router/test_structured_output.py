"""``response_format`` (JSON mode, JSON Schema) through a real node, driven by the openai SDK."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "What is 2 + 3? Reply in JSON."}]
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


class Answer(BaseModel):
    answer: int
    unit: str


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_json_object_mode_answers_a_json_object(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="edge", messages=ASK, temperature=0, max_tokens=60, response_format={"type": "json_object"}
    )
    done = raw.parse()
    assert raw.headers["x-edgeroute-route"] == "edge"
    assert done.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(done.choices[0].message.content or ""), dict)
    plain = client.chat.completions.create(model="edge", messages=ASK, temperature=0, max_tokens=60)
    assert plain.choices[0].message.content != done.choices[0].message.content  # the grammar changed it


def test_the_sdks_parse_gets_an_instance_of_the_pydantic_model(client: openai.OpenAI) -> None:
    # The SDK sends the model's strict JSON Schema (json_schema, strict: true) and parses the reply.
    done = client.chat.completions.parse(
        model="edge", messages=ASK, temperature=0, max_tokens=60, response_format=Answer
    )
    parsed = done.choices[0].message.parsed
    assert isinstance(parsed, Answer)
    assert json.loads(done.choices[0].message.content or "") == parsed.model_dump()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_streamed_answer_matches_the_schema(client: openai.OpenAI, temperature: float) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "sum", "schema": ANSWER_SCHEMA, "strict": True}}
    parts = []
    finish = None
    for chunk in client.chat.completions.create(
        model="edge", messages=ASK, temperature=temperature, seed=7, max_tokens=60, response_format=rf, stream=True  # type: ignore[arg-type]
    ):
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    value = json.loads("".join(parts))
    assert finish == "stop"
    assert list(value) == ["answer"]
    assert isinstance(value["answer"], int)


def test_the_cache_keeps_json_and_free_text_answers_apart(node_url: str) -> None:
    body = {"model": "edge", "messages": [{"role": "user", "content": "Name a colour, as JSON."}], "temperature": 0, "max_tokens": 30}
    as_json = {**body, "response_format": {"type": "json_object"}}
    headers = {"x-edgeroute-tenant": "structured"}
    first = httpx.post(node_url + "/v1/chat/completions", json=as_json, headers=headers, timeout=120)
    again = httpx.post(node_url + "/v1/chat/completions", json=as_json, headers=headers, timeout=120)
    plain = httpx.post(node_url + "/v1/chat/completions", json=body, headers=headers, timeout=120)
    assert [first.headers["x-edgeroute-route"], again.headers["x-edgeroute-route"]] == ["edge", "cache-exact"]
    assert again.json()["choices"][0]["message"]["content"] == first.json()["choices"][0]["message"]["content"]
    assert plain.headers["x-edgeroute-route"] == "edge"  # never the JSON answer from the cache


@pytest.mark.parametrize(
    ("response_format", "says"),
    [
        ({"type": "xml"}, "response_format"),
        ({"type": "json_schema"}, "json_schema is required"),
        ({"type": "json_schema", "json_schema": {"name": "bad name!", "schema": {}}}, "name"),
        ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "wat"}}}, "cannot be enforced"),
        ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "maxLength": 6000}}}, "over the 32000"),
        # refused from the schema's own numbers, before any grammar is built
        ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "maxLength": 20000}}}, "over the 8192"),
        ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "minLength": 10**9}}}, "over the 8192"),
        ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "pattern": "^(a{100}){100}$"}}},
         "more than 8192 repetitions"),
        ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "pattern": "^a\u0000$"}}}, "NUL"),
    ],
)
def test_a_schema_that_cannot_be_enforced_is_a_400(node_url: str, response_format: dict, says: str) -> None:
    body = {"model": "edge", "messages": ASK, "max_tokens": 8, "response_format": response_format}
    response = httpx.post(node_url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert says in error["message"]
    assert (error["param"] or "").startswith("response_format")
