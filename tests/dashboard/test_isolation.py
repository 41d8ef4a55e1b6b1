"""Tenants and the operator on a real node process: two tenant keys and one operator key.

Every tenant-A resource the dashboard has (pages, htmx fragments, the SSE stream, cache search
and delete, /metrics) is refused to tenant B with 403 — the dashboard is operator-only, so B's
own data is refused too — and A's cache entry survives B's delete. The operator sees and manages
both tenants. The node's files hold no key and are the operator's alone (0600, dir 0700).
"""

from __future__ import annotations

import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.auth import COOKIE
from models.keys import key_digest
from loadtest.servers import NodeProcess, node_process

pytestmark = [pytest.mark.slow]

KEY_A, KEY_B, KEY_OP = "sk-team-a-5f1c0e", "sk-team-b-9a7d33", "sk-operator-c41b"
CONFIG = f"""
[server]
api_keys = {{ "{KEY_A}" = "team-a", "{KEY_B}" = "team-b" }}
operator_keys = ["{KEY_OP}"]
"""
A_PROMPT = "Team A asks: what colour is the sky on a clear day?"
B_PROMPT = "Team B asks: name one fruit that is yellow."
A, B, OP = ({"Authorization": f"Bearer {k}"} for k in (KEY_A, KEY_B, KEY_OP))
HX = {"HX-Request": "true"}


def chat(node: NodeProcess, headers: dict[str, str], prompt: str, request_id: str) -> httpx.Response:
    body = {"model": "edge", "messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "temperature": 0}
    return httpx.post(
        f"{node.base}/v1/chat/completions",
        json=body,
        headers={**headers, "x-request-id": request_id},
        timeout=120,
    )


def entry_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-entry-id="(\d+)"', html)]


def find_entries(node: NodeProcess, tenant: str, q: str) -> list[int]:
    """The ids of a tenant's cache entries matching ``q``, as the operator's dashboard lists them."""
    deadline = time.monotonic() + 20
    while True:
        page = httpx.get(f"{node.base}/dashboard/cache/search", params={"q": q, "tenant": tenant}, headers=OP)
        assert page.status_code == 200
        ids = entry_ids(page.text)
        if ids or time.monotonic() > deadline:
            return ids
        time.sleep(0.2)  # the cache stores on its writer thread


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    root = tmp_path_factory.mktemp("isolation")
    config = root / "node.toml"
    config.write_text(CONFIG)
    args = ("--config", str(config), "--data-dir", str(root / "data"), "--no-local-member", "--log-level", "info")
    with node_process(*args, log_path=root / "node.log") as running:
        yield running


@pytest.fixture(scope="module")
def seeded(node: NodeProcess) -> dict[str, Any]:
    """Each tenant asks once; B then asks A's question claiming to be A; A asks again."""
    a1 = chat(node, A, A_PROMPT, "req-a-1")
    b1 = chat(node, B, B_PROMPT, "req-b-1")
    b2 = chat(node, {**B, "x-edgeroute-tenant": "team-a"}, A_PROMPT, "req-b-2")
    a2 = chat(node, A, A_PROMPT, "req-a-2")
    for r in (a1, b1, b2, a2):
        assert r.status_code == 200, r.text
    a_entries = find_entries(node, "team-a", "sky")
    b_entries = find_entries(node, "team-b", "fruit")
    assert len(a_entries) == 1 and len(b_entries) == 1
    return {"routes": [r.headers["x-edgeroute-route"] for r in (a1, b1, b2, a2)], "a": a_entries[0], "b": b_entries[0]}


def test_v1_needs_a_key_and_a_tenant_key_reaches_only_its_tenant(node: NodeProcess, seeded: dict[str, Any]) -> None:
    for headers in ({}, {"Authorization": "Bearer sk-nope"}, {"Authorization": f"Bearer {key_digest(KEY_A)}"}):
        refused = chat(node, headers, A_PROMPT, "req-x")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        for path in ("/v1/models", "/v1/models/auto"):
            listed = httpx.get(f"{node.base}{path}", headers=headers, timeout=10)
            assert listed.status_code == 401 and listed.json()["error"]["code"] == "invalid_api_key", path
    # B asking A's question, even naming team-a in the header, is not served A's answer.
    assert seeded["routes"] == ["edge", "edge", "edge", "cache-exact"]


def test_tenant_b_gets_403_for_every_dashboard_resource(node: NodeProcess, seeded: dict[str, Any]) -> None:
    a_entry = seeded["a"]
    paths = [
        "/dashboard",
        "/dashboard/feed",
        "/dashboard/feed/rows",
        "/dashboard/feed/rows?limit=5000",
        "/dashboard/requests/req-a-1",
        "/dashboard/requests/req-b-1",  # B's own: the dashboard is the operator's
        "/dashboard/pool",
        "/dashboard/cache",
        "/dashboard/cache?tenant=team-a",
        "/dashboard/cache?q=sky&tenant=team-a",
        "/dashboard/cache/search?q=sky",
        "/dashboard/cache/search?q=sky&tenant=team-a",
        "/dashboard/cache/search?q=&tenant=team-b",
        "/dashboard/events",
        "/dashboard/events?topics=feed,stats,cache",
        "/metrics",
    ]
    for path in paths:
        for extra in ({}, HX):
            response = httpx.get(node.base + path, headers={**B, **extra}, follow_redirects=False, timeout=10)
            assert response.status_code == 403, (path, response.status_code)
            assert response.json()["error"]["code"] == "operator_key_required", path
            assert "sky" not in response.text and "team-a" not in response.text, path
    delete = httpx.post(f"{node.base}/dashboard/cache/entries/{a_entry}/delete", headers={**B, **HX})
    assert delete.status_code == 403
    # A's entry is still there, and still answers A.
    assert find_entries(node, "team-a", "sky") == [a_entry]
    assert chat(node, A, A_PROMPT, "req-a-3").headers["x-edgeroute-route"] == "cache-exact"
    # A tenant key buys no session either.
    form = httpx.post(f"{node.base}/dashboard/login", data={"key": KEY_B, "next": "/dashboard"})
    assert form.status_code == 403 and COOKIE not in form.headers.get("set-cookie", "")


def test_the_operator_sees_and_manages_every_tenant(node: NodeProcess, seeded: dict[str, Any]) -> None:
    rows = httpx.get(f"{node.base}/dashboard/feed/rows?limit=50", headers=OP)
    assert rows.status_code == 200
    assert 'id="req-req-a-1"' in rows.text and 'id="req-req-b-1"' in rows.text
    details = httpx.get(f"{node.base}/dashboard/requests/req-a-1", headers=OP)
    assert details.status_code == 200 and "what colour is the sky" in details.text and "team-a" in details.text
    for path in ("/dashboard", "/dashboard/feed", "/dashboard/pool", "/dashboard/cache?tenant=team-b", "/metrics"):
        assert httpx.get(node.base + path, headers=OP).status_code == 200, path
    with httpx.stream("GET", f"{node.base}/dashboard/events?topics=feed", headers=OP, timeout=10) as live:
        assert live.status_code == 200 and live.headers["content-type"].startswith("text/event-stream")
    # On /v1 an operator acts for the tenant it names: A's cached answer, for team-a.
    as_a = chat(node, {**OP, "x-edgeroute-tenant": "team-a"}, A_PROMPT, "req-op-1")
    assert as_a.status_code == 200 and as_a.headers["x-edgeroute-route"] == "cache-exact"
    # The operator deletes B's entry; B's question is answered by the model again.
    deleted = httpx.post(f"{node.base}/dashboard/cache/entries/{seeded['b']}/delete", headers={**OP, **HX})
    assert deleted.status_code == 200
    assert find_entries(node, "team-b", "fruit") == []
    assert chat(node, B, B_PROMPT, "req-b-3").headers["x-edgeroute-route"] == "edge"
    # And logs in with the form: the cookie opens the pages.
    with httpx.Client(base_url=node.base) as browser:
        login = browser.post("/dashboard/login", data={"key": KEY_OP, "next": "/dashboard/feed"})
        assert login.status_code == 303 and browser.cookies.get(COOKIE)
        assert browser.get("/dashboard/feed").status_code == 200


def test_the_openapi_document_names_the_bearer_scheme(node: NodeProcess) -> None:
    doc = httpx.get(f"{node.base}/openapi/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearer"]["description"],
    }
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/models/{model_id}"):
        for operation in doc["paths"][path].values():
            assert operation["security"] == [{"bearer": []}], path
    assert "security" not in doc["paths"]["/healthz"]["get"]


def test_login_attempts_are_limited_per_address(node: NodeProcess) -> None:
    # Other tests here logged in from this address too: at most 10 attempts a minute in all.
    codes = []
    for _ in range(11):
        response = httpx.post(f"{node.base}/dashboard/login", data={"key": "sk-guess", "next": "/dashboard"})
        codes.append(response.status_code)
        if response.status_code == 429:
            break
    assert codes[-1] == 429 and set(codes[:-1]) <= {401}, codes
    assert 1 <= int(response.headers["retry-after"]) <= 60
    right_key = httpx.post(f"{node.base}/dashboard/login", data={"key": KEY_OP, "next": "/dashboard"})
    assert right_key.status_code == 429 and "set-cookie" not in right_key.headers
    # Bearer keys are not the login form: the operator's scraper still gets in.
    assert httpx.get(f"{node.base}/metrics", headers=OP).status_code == 200


def test_no_key_reaches_the_logs_the_decision_log_or_the_cache(node: NodeProcess, seeded: dict[str, Any]) -> None:
    time.sleep(1.5)  # the decision log is written every 0.5 s
    data = Path(node.log_path.parent / "data")
    files = [p for p in data.iterdir() if p.is_file()] + [node.log_path]
    assert any(p.name == "cache.db" for p in files) and any(p.name == "telemetry.db" for p in files)
    secrets = [k.encode() for k in (KEY_A, KEY_B, KEY_OP)]
    secrets += [key_digest(k).removeprefix("sha256:").encode() for k in (KEY_A, KEY_B, KEY_OP)]
    for path in files:
        content = path.read_bytes()
        for secret in secrets:
            assert secret not in content, (path.name, secret[:12])
    assert "team-a" in node.log()  # the request lines are there, with the tenant and not the key


def test_data_files_are_0600_and_the_data_dir_0700(node: NodeProcess, seeded: dict[str, Any]) -> None:
    data = Path(node.log_path.parent / "data")
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    names = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir()}
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", "telemetry.db", "telemetry.db-wal", "telemetry.db-shm", "responses.db"):
        assert names.get(name) == 0o600, (name, names)
    assert all(mode & 0o077 == 0 for mode in names.values()), names
