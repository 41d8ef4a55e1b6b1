"""Stored responses (``store``, ``previous_response_id``, ``GET``/``DELETE /v1/responses/{id}``)
through real nodes and the openai SDK, and the store's own rules (tenants, expiry, migrations)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import sqlite_utils

from edgeroute.app import create_app
from router import load_settings
from router import responses_store
from router.responses_store import ResponsesSettings, ResponseStore
from loadtest.servers import serve_app

WEATHER = {
    "type": "function", "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"], "additionalProperties": False},
}


@pytest.fixture()
def client(node_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=node_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _count(base: str, messages: list[dict[str, Any]]) -> int:
    return int(httpx.post(base + "/tokenize", json={"messages": messages}, timeout=30).json()["count"])


@pytest.mark.slow
def test_a_stored_response_is_retrieved_as_it_was_answered(client: openai.OpenAI) -> None:
    done = client.responses.create(model="edge", input="Say hi.", max_output_tokens=6, temperature=0)
    assert done.store is True
    again = client.responses.retrieve(done.id)
    assert again.model_dump() == done.model_dump()


@pytest.mark.slow
def test_previous_response_id_continues_the_whole_conversation(node_url: str, client: openai.OpenAI) -> None:
    first = client.responses.create(model="edge", input="My name is Ada.", max_output_tokens=8, temperature=0)
    second = client.responses.create(
        model="edge", previous_response_id=first.id, input="What is my name?", instructions="Be brief.",
        max_output_tokens=8, temperature=0,
    )
    assert second.previous_response_id == first.id and second.usage is not None
    # The model read: the instructions, the first turn and its answer, then the new input.
    said = [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": first.output_text}, {"role": "user", "content": "What is my name?"},
    ]
    assert second.usage.input_tokens == _count(node_url, said)
    third = client.responses.create(model="edge", previous_response_id=second.id, input="Thanks.", max_output_tokens=4, temperature=0)
    # Instructions are not carried over (as OpenAI's are not); the conversation is.
    assert third.usage is not None
    assert third.usage.input_tokens == _count(node_url, [*said[1:], {"role": "assistant", "content": second.output_text}, {"role": "user", "content": "Thanks."}])


@pytest.mark.slow
def test_a_function_call_s_output_continues_the_call(node_url: str, client: openai.OpenAI) -> None:
    ask = "What is the weather in Paris?"
    first = client.responses.create(model="edge", input=ask, tools=[WEATHER], tool_choice="required", max_output_tokens=40, temperature=0)  # type: ignore[list-item]
    fc = first.output[0]
    assert fc.type == "function_call"
    follow = client.responses.create(
        model="edge", previous_response_id=first.id, max_output_tokens=4, temperature=0,
        input=[{"type": "function_call_output", "call_id": fc.call_id, "output": "sunny"}],  # type: ignore[union-attr]
    )
    assert follow.status in ("completed", "incomplete") and follow.output[0].type == "message"
    # The system message the forced call added is not part of the stored conversation.
    call_text = json.dumps([{"name": fc.name, "arguments": fc.arguments}])  # type: ignore[union-attr]
    said = [{"role": "user", "content": ask}, {"role": "assistant", "content": call_text}, {"role": "tool", "content": "sunny"}]
    assert follow.usage is not None and follow.usage.input_tokens == _count(node_url, said)


@pytest.mark.slow
def test_a_streamed_response_is_stored_before_its_last_event(client: openai.OpenAI) -> None:
    seen = None
    for event in client.responses.create(model="edge", input="Say hi.", max_output_tokens=6, stream=True):
        if event.type in ("response.completed", "response.incomplete"):
            seen = client.responses.retrieve(event.response.id)  # the stream is still open here
            assert seen.output_text == event.response.output_text
    assert seen is not None


@pytest.mark.slow
def test_deleted_unstored_and_unknown_responses_are_404(node_url: str, client: openai.OpenAI) -> None:
    kept = client.responses.create(model="edge", input="Say hi.", max_output_tokens=2)
    client.responses.delete(kept.id)
    unstored = client.responses.create(model="edge", input="Say hi.", max_output_tokens=2, store=False)
    assert unstored.store is False
    for response_id in (kept.id, unstored.id, "resp_unknown"):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response_id)
        assert httpx.delete(f"{node_url}/v1/responses/{response_id}", timeout=10).status_code == 404
        answer = httpx.post(node_url + "/v1/responses", json={"model": "edge", "input": "x", "previous_response_id": response_id}, timeout=30)
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "previous_response_not_found"


@pytest.mark.slow
def test_input_items_list_the_request_s_own_input_newest_first_and_page(node_url: str, client: openai.OpenAI) -> None:
    first = client.responses.create(model="edge", input="Earlier turn.", max_output_tokens=2)
    sent: list[Any] = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"role": "assistant", "content": "Hello!"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    done = client.responses.create(model="edge", previous_response_id=first.id, input=sent, max_output_tokens=2)
    newest_first = client.responses.input_items.list(done.id).data
    assert [i.type for i in newest_first] == ["function_call_output", "function_call", "message", "message", "message"]
    oldest_first = [i.model_dump(exclude_none=True) for i in client.responses.input_items.list(done.id, order="asc").data]
    assert [i["id"] for i in oldest_first] == [i.id for i in reversed(newest_first)]
    assert (oldest_first[0]["role"], oldest_first[0]["content"]) == ("developer", [{"type": "input_text", "text": "Be brief."}])
    assert oldest_first[2]["content"][0]["text"] == "Hello!" and oldest_first[2]["content"][0]["type"] == "output_text"
    assert oldest_first[4]["output"] == "sunny" and oldest_first[3]["name"] == "get_weather"
    page = client.responses.input_items.list(done.id, order="asc", limit=2)
    assert [i.id for i in page.data] == [i["id"] for i in oldest_first[:2]] and page.has_more
    assert [i.id for i in client.responses.input_items.list(done.id, order="asc", limit=2)] == [i["id"] for i in oldest_first]
    unknown = httpx.get(f"{node_url}/v1/responses/{done.id}/input_items", params={"after": "msg_nope"}, timeout=10)
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "after"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = Path(tmp_path_factory.mktemp("keyed-responses"))
    settings = load_settings(
        data_dir=data, cloud={"local_member": False}, cache={"enabled": False},
        server={"api_keys": {"key-a": "team-a", "key-b": "team-b"}},
    )
    with serve_app(create_app(settings)) as base:
        yield base, data


@pytest.mark.slow
def test_a_tenant_cannot_read_continue_or_delete_another_s_response(keyed: tuple[str, Path]) -> None:
    base, _ = keyed
    a = openai.OpenAI(base_url=base + "/v1", api_key="key-a", max_retries=0)
    b = openai.OpenAI(base_url=base + "/v1", api_key="key-b", max_retries=0)
    mine = a.responses.create(model="edge", input="A secret.", max_output_tokens=2)
    with pytest.raises(openai.NotFoundError):
        b.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.create(model="edge", input="x", previous_response_id=mine.id, max_output_tokens=2)
    with pytest.raises(openai.NotFoundError):
        b.responses.delete(mine.id)
    assert httpx.get(f"{base}/v1/responses/{mine.id}/input_items", headers={"authorization": "Bearer key-b"}, timeout=10).status_code == 404
    assert a.responses.retrieve(mine.id).id == mine.id


@pytest.mark.slow
def test_stored_responses_outlive_the_node(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, cloud={"local_member": False}, cache={"enabled": False})
    with serve_app(create_app(settings)) as base:
        done = openai.OpenAI(base_url=base + "/v1", api_key="x").responses.create(model="edge", input="Say hi.", max_output_tokens=3)
    with serve_app(create_app(settings)) as base:
        assert openai.OpenAI(base_url=base + "/v1", api_key="x").responses.retrieve(done.id).output_text == done.output_text


async def test_the_store_keeps_tenants_apart_expires_old_rows_and_records_its_migrations(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "r.db", ResponsesSettings(retention_days=1))
    response = {"id": "resp_1", "output": []}
    await store.put("a", response, [{"role": "user", "content": "hi"}])
    assert await store.get("a", "resp_1") == (response, [{"role": "user", "content": "hi"}])
    assert await store.get("b", "resp_1") is None and not await store.delete("b", "resp_1")
    store._db.execute("UPDATE responses SET created_at = created_at - 2 * 86400")  # two days old
    assert await store.get("a", "resp_1") is None
    assert [m.name for m in responses_store.MIGRATIONS.applied(store._db)] == ["0001_responses", "0002_input_items", "0003_tenant_index"]


async def test_a_tenant_keeps_its_newest_responses_up_to_the_cap_and_no_other_tenant_s_go(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "r.db", ResponsesSettings(max_per_tenant=3))
    await store.put("b", {"id": "resp_b", "output": []}, [])
    for i in range(5):
        await store.put("a", {"id": f"resp_{i}", "output": []}, [])
    kept = [i for i in range(5) if await store.get("a", f"resp_{i}") is not None]
    assert kept == [2, 3, 4]
    assert await store.get("b", "resp_b") is not None


async def test_a_database_of_the_first_migration_is_upgraded_in_place(tmp_path: Path) -> None:
    db = sqlite_utils.Database(tmp_path / "r.db")
    responses_store.MIGRATIONS.apply(db, stop_before="0002_input_items")
    db["responses"].insert({"id": "resp_old", "tenant": "a", "created_at": 4e9, "response": "{}", "conversation": "[]"})
    db.conn.close()
    store = ResponseStore(tmp_path / "r.db", ResponsesSettings())
    assert await store.input_items("a", "resp_old") == [] and await store.get("a", "resp_old") == ({}, [])
    assert [m.name for m in responses_store.MIGRATIONS.applied(store._db)] == ["0001_responses", "0002_input_items", "0003_tenant_index"]
