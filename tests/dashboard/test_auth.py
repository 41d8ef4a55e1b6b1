"""Dashboard and /metrics for operators only: bearer header, login form, session cookie; tenant
keys refused (403) everywhere, the login form limited per client address."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dashfakes import FakeNode, event, fake_app
from httpx_sse import connect_sse
from litestar import Litestar
from litestar.testing import TestClient

from dashboard.auth import COOKIE, SESSION_TTL_S, DashboardAuth, safe_next
from loadtest.servers import serve_app
from models.attempts import AttemptLimiter
from models.keys import KeyTable, key_digest

# Tenant keys (key -> tenant) and the operator's.
KEYS = {"sk-acme": "acme", "sk-other": "globex"}
OPERATORS = ["sk-ops"]
UNAUTHORIZED = {
    "error": {
        "message": "invalid or missing API key",
        "type": "authentication_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
PAGES = ("/dashboard", "/dashboard/feed", "/dashboard/pool", "/dashboard/cache")
FRAGMENTS = (
    "/dashboard/feed/rows",
    "/dashboard/requests/r1",
    "/dashboard/cache/search?q=capital",
    "/dashboard/events",
    "/metrics",
)


@pytest.fixture
def keyed(node: FakeNode) -> Iterator[TestClient[Litestar]]:
    with TestClient(fake_app(node, KEYS, OPERATORS)) as c:
        yield c


def operator(key: str = "sk-ops"):  # type: ignore[no-untyped-def]
    principal = KeyTable.of(KEYS, OPERATORS).lookup(key)
    assert principal is not None and principal.operator
    return principal


def login(client: httpx.Client, key: str, next_url: str = "/dashboard") -> httpx.Response:
    return client.post("/dashboard/login", data={"key": key, "next": next_url}, follow_redirects=False)


def test_pages_redirect_to_the_login_form(keyed: TestClient[Litestar]) -> None:
    for path in PAGES:
        response = keyed.get(path, follow_redirects=False)
        assert response.status_code == 303, path
        assert response.headers["location"] == f"/dashboard/login?next={path}"
    with_query = keyed.get("/dashboard/cache?q=a b&tenant=acme", follow_redirects=False)
    expected = "/dashboard/login?next=/dashboard/cache%3Fq%3Da%2520b%26tenant%3Dacme"
    assert with_query.headers["location"] == expected
    # htmx asking for a page must not swap the login form into a panel.
    assert keyed.get("/dashboard/pool", headers={"HX-Request": "true"}).status_code == 401


def test_fragments_stream_and_metrics_answer_401(keyed: TestClient[Litestar], node: FakeNode) -> None:
    assert node.cache is not None
    for path in FRAGMENTS:
        response = keyed.get(path, follow_redirects=False)
        assert response.status_code == 401, path
        assert response.json() == UNAUTHORIZED, path
        assert response.headers["www-authenticate"] == 'Bearer realm="edgeroute"'
    delete = keyed.post("/dashboard/cache/entries/3/delete", headers={"HX-Request": "true"})
    assert delete.status_code == 401 and delete.json() == UNAUTHORIZED
    assert 3 in node.cache.entries
    # The static files stay open: the login page needs its stylesheet.
    assert keyed.get("/dashboard/static/app.css").status_code == 200


def test_a_tenant_key_gets_403_everywhere(keyed: TestClient[Litestar], node: FakeNode) -> None:
    assert node.cache is not None and node.telemetry is not None
    node.telemetry.record(event("r1", tenant="globex"))
    for key in KEYS:  # its own tenant's data included: the dashboard is the operator's
        bearer = {"Authorization": f"Bearer {key}"}
        for path in PAGES + FRAGMENTS + ("/dashboard/cache?tenant=globex", "/dashboard/feed/rows?limit=5"):
            response = keyed.get(path, headers=bearer, follow_redirects=False)
            assert response.status_code == 403, (key, path)
            assert response.json()["error"]["code"] == "operator_key_required", path
            assert "globex" not in response.text and "Spain" not in response.text
        for entry_id in (1, 3):
            delete = keyed.post(f"/dashboard/cache/entries/{entry_id}/delete", headers={**bearer, "HX-Request": "true"})
            assert delete.status_code == 403
    assert sorted(node.cache.entries) == [1, 2, 3]
    # A tenant key is no way into a session either.
    refused = login(keyed, "sk-other")
    assert refused.status_code == 403 and "set-cookie" not in refused.headers
    assert "That is a tenant key." in refused.text


def test_an_operator_bearer_key_opens_everything(keyed: TestClient[Litestar], node: FakeNode) -> None:
    assert node.cache is not None and node.telemetry is not None
    node.telemetry.record(event("r1"))
    bearer = {"Authorization": "Bearer sk-ops"}
    for path in PAGES + FRAGMENTS[:-2] + ("/metrics",):
        assert keyed.get(path, headers=bearer).status_code == 200, path
    assert 'id="req-r1"' in keyed.get("/dashboard/feed/rows", headers=bearer).text
    assert "edgeroute_requests_total" in keyed.get("/metrics", headers=bearer).text
    deleted = keyed.post("/dashboard/cache/entries/3/delete", headers={**bearer, "HX-Request": "true"})
    assert deleted.status_code == 200 and 3 not in node.cache.entries
    for wrong in ("Bearer sk-nope", "Bearer ", "Basic c2stb3Bz", "sk-ops", "Bearer sk-ops2", "Bearer sha256:"):
        assert keyed.get("/metrics", headers={"Authorization": wrong}).status_code == 401, wrong


def test_login_sets_a_strict_httponly_cookie(keyed: TestClient[Litestar]) -> None:
    form = keyed.get("/dashboard/login?next=/dashboard/pool")
    assert form.status_code == 200 and form.headers["cache-control"] == "no-store"
    assert '<form class="login" method="post" action="/dashboard/login">' in form.text
    assert '<input type="hidden" name="next" value="/dashboard/pool">' in form.text
    assert "script-src 'self'" in form.headers["content-security-policy"]
    response = login(keyed, "sk-ops", "/dashboard/pool")
    assert response.status_code == 303 and response.headers["location"] == "/dashboard/pool"
    cookie = response.headers["set-cookie"]
    value = cookie.split(";")[0].removeprefix(f"{COOKIE}=")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert attributes == {"httponly", f"max-age={SESSION_TTL_S}", "path=/", "samesite=strict"}
    # Neither the key nor its digest leaves the server: the value is a random session id.
    assert "sk-ops" not in cookie and key_digest("sk-ops").removeprefix("sha256:") not in cookie
    assert len(value) >= 43
    page = keyed.get("/dashboard/pool")  # the client keeps the cookie, as a browser does
    assert page.status_code == 200
    assert '<form class="logout" method="post" action="/dashboard/logout">' in page.text
    assert keyed.get("/dashboard/feed/rows").status_code == 200
    assert keyed.get("/metrics").status_code == 200
    # A wrong bearer header is judged alone, cookie or not.
    assert keyed.get("/metrics", headers={"Authorization": "Bearer sk-nope"}).status_code == 401
    # Already logged in: the form sends the browser on.
    again = keyed.get("/dashboard/login?next=/dashboard/cache", follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"] == "/dashboard/cache"


def test_a_wrong_key_is_refused_and_the_form_shown_again(keyed: TestClient[Litestar]) -> None:
    for wrong in ("sk-nope", "", "SK-OPS", "sk-opsx", "sha256:" + "0" * 64):
        response = login(keyed, wrong, "/dashboard/feed")
        assert response.status_code == 401, wrong
        assert "set-cookie" not in response.headers
        assert '<p class="notice" id="login-error" role="alert">' in response.text
        assert "That key is not one of this node&#39;s API keys." in response.text
        assert '<input type="hidden" name="next" value="/dashboard/feed">' in response.text
    assert keyed.get("/dashboard", follow_redirects=False).status_code == 303


def test_logout_ends_the_session(keyed: TestClient[Litestar]) -> None:
    login(keyed, "sk-ops")
    assert keyed.get("/dashboard", follow_redirects=False).status_code == 200
    out = keyed.post("/dashboard/logout", follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/dashboard/login"
    assert out.headers["set-cookie"].startswith(f'{COOKIE}=""; ')
    assert keyed.get("/dashboard", follow_redirects=False).status_code == 303


async def test_a_closed_session_is_refused_and_the_others_kept() -> None:
    auth = DashboardAuth(KeyTable.of(KEYS, OPERATORS))
    first, second = await auth.open_session(operator()), await auth.open_session(operator())
    assert first != second  # each login is its own session
    await auth.close_session(first)
    assert await auth.session(first) is None
    assert await auth.session(second) == operator()  # the operator's other browser
    await auth.close_session(first)  # nothing left to end: no error
    assert await auth.session(second) == operator()


def test_logout_ends_the_session_on_the_server(node: FakeNode) -> None:
    with serve_app(fake_app(node, KEYS, OPERATORS), ready_path=None) as base, httpx.Client(base_url=base, timeout=10) as http:
        assert login(http, "sk-ops").status_code == 303
        stolen = http.cookies[COOKIE]  # a copy of the cookie, kept elsewhere
        assert http.get("/metrics").status_code == 200
        out = http.post("/dashboard/logout", headers={"origin": base}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/dashboard/login"
        with httpx.Client(base_url=base, timeout=10, cookies={COOKIE: stolen}) as other:
            assert other.get("/metrics").json() == UNAUTHORIZED
            page = other.get("/dashboard", follow_redirects=False)
            assert page.status_code == 303 and page.headers["location"] == "/dashboard/login?next=/dashboard"
            assert other.get("/dashboard/events").status_code == 401


def test_login_and_logout_refuse_another_sites_form(node: FakeNode) -> None:
    with serve_app(fake_app(node, KEYS, OPERATORS), ready_path=None) as base, httpx.Client(base_url=base, timeout=10) as http:
        host = base.removeprefix("http://")
        for headers in ({"origin": "https://evil.example"}, {"origin": "null"},
                        {"referer": "https://evil.example/page"}, {"origin": f"http://{host}.evil.example"}):
            refused = http.post("/dashboard/login", data={"key": "sk-ops"}, headers=headers, follow_redirects=False)
            assert refused.status_code == 403, headers
            assert refused.json()["error"]["code"] == "cross_site_request"
            assert "set-cookie" not in refused.headers
        # The node's own page (a browser sends its origin), over TLS at a proxy (scheme differs) too.
        for origin in (base, f"https://{host}"):
            assert login_from(http, origin).status_code == 303
        assert http.get("/metrics").status_code == 200
        cross = http.post("/dashboard/logout", headers={"origin": "https://evil.example"}, follow_redirects=False)
        assert cross.status_code == 403 and "set-cookie" not in cross.headers
        assert http.get("/metrics").status_code == 200  # still logged in
        same = http.post("/dashboard/logout", headers={"referer": f"{base}/dashboard/pool"}, follow_redirects=False)
        assert same.status_code == 303
        assert http.get("/metrics").status_code == 401


def login_from(client: httpx.Client, origin: str) -> httpx.Response:
    return client.post("/dashboard/login", data={"key": "sk-ops"}, headers={"origin": origin}, follow_redirects=False)


def test_the_login_page_escapes_and_never_sends_elsewhere(keyed: TestClient[Litestar]) -> None:
    evil = '/dashboard/"><script>alert(1)</script>'
    html = keyed.get("/dashboard/login", params={"next": evil}).text
    assert "<script>" not in html
    assert 'value="/dashboard/&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html
    outside = (
        "https://evil.example/dashboard",
        "//evil.example/dashboard",
        "/\\evil.example",
        "/v1/models",
        "/dashboardx",
    )
    for target in outside:
        html = keyed.get("/dashboard/login", params={"next": target}).text
        assert '<input type="hidden" name="next" value="/dashboard">' in html, target
    for target in outside:  # logging in sends the browser home, not to the target
        assert login(keyed, "sk-ops", target).headers["location"] == "/dashboard", target
    assert safe_next("/ops/board/pool?x=1", "/ops/board") == "/ops/board/pool?x=1"
    assert safe_next("/ops/boardroom", "/ops/board") == "/ops/board"


async def test_sessions_expire_and_cannot_be_forged() -> None:
    auth = DashboardAuth(KeyTable.of(KEYS, OPERATORS), ttl_s=1)
    value = await auth.open_session(operator())
    assert await auth.session(value) == operator()
    for forged in ("", ".", "x.y", value[:-1], value + "x", value.upper()):
        assert await auth.session(forged) is None, forged
    await asyncio.sleep(1.1)
    assert await auth.session(value) is None  # expired, whatever its use meanwhile
    # An expired session is forgotten at the next login: the store does not grow with them.
    await auth.open_session(operator())
    assert not await auth.sessions.exists(value)
    # A key taken out of the settings ends the sessions made with it.
    auth = DashboardAuth(KeyTable.of(KEYS, OPERATORS))
    value = await auth.open_session(operator())
    auth.keys = KeyTable.of(KEYS, ["sk-new"])
    assert await auth.session(value) is None
    # Only an operator gets a session.
    tenant = KeyTable.of(KEYS).lookup("sk-acme")
    assert tenant is not None
    with pytest.raises(ValueError):
        await auth.open_session(tenant)
    assert DashboardAuth().enabled is False and DashboardAuth(KeyTable.of({"k": "t"})).enabled is True


def test_no_keys_leaves_the_dashboard_open(client: TestClient[Litestar]) -> None:
    page = client.get("/dashboard")
    assert page.status_code == 200 and 'class="logout"' not in page.text
    assert client.get("/metrics").status_code == 200
    to_board = client.get("/dashboard/login?next=/dashboard/pool", follow_redirects=False)
    assert to_board.status_code == 303 and to_board.headers["location"] == "/dashboard/pool"
    posted = client.post("/dashboard/login", data={"key": "anything"}, follow_redirects=False)
    assert posted.status_code == 303 and "set-cookie" not in posted.headers


def test_the_cookie_is_secure_over_https(node: FakeNode) -> None:
    with TestClient(fake_app(node, KEYS, OPERATORS), base_url="https://testserver.local") as c:
        cookie = login(c, "sk-ops").headers["set-cookie"]
    assert "secure" in {part.strip().lower() for part in cookie.split(";")}


def test_the_node_app_puts_dashboard_and_metrics_behind_its_keys(tmp_path: Path) -> None:
    from edgeroute.app import create_app
    from router import load_settings

    settings = load_settings(data_dir=tmp_path, server={"api_keys": KEYS, "operator_keys": OPERATORS})
    # No lifespan (no models loaded): the guard answers before any handler reads the node.
    c = TestClient(create_app(settings))
    assert c.get("/metrics").json() == UNAUTHORIZED
    assert c.get("/metrics", headers={"Authorization": "Bearer sk-acme"}).status_code == 403
    assert c.get("/metrics", headers={"Authorization": "Bearer sk-ops"}).status_code == 200
    redirect = c.get("/dashboard", follow_redirects=False)
    assert redirect.headers["location"] == "/dashboard/login?next=/dashboard"
    assert c.get("/dashboard/events").status_code == 401


def test_the_live_stream_accepts_the_login_cookie(node: FakeNode) -> None:
    assert node.telemetry is not None
    with serve_app(fake_app(node, KEYS, OPERATORS), ready_path=None) as base, httpx.Client(base_url=base, timeout=10) as http:
        assert http.get("/dashboard/events?topics=feed").status_code == 401
        assert login(http, "sk-ops").status_code == 303
        assert http.cookies.get(COOKIE) is not None
        with connect_sse(http, "GET", "/dashboard/events?topics=feed") as source:
            assert source.response.status_code == 200
            assert source.response.headers["content-type"].startswith("text/event-stream")
            deadline = time.monotonic() + 10
            while node.telemetry.bus.subscribers < 1:
                assert time.monotonic() < deadline, "the SSE handler never subscribed"
                time.sleep(0.02)
            node.telemetry.record(event("live-auth"))
            for sse in source.iter_sse():
                if sse.event == "feed":
                    assert 'id="req-live-auth"' in sse.data
                    break


def test_a_node_with_tenant_keys_only_keeps_the_dashboard_closed(node: FakeNode) -> None:
    with TestClient(fake_app(node, KEYS)) as c:
        form = c.get("/dashboard/login")
        assert form.status_code == 200 and "This node has no operator keys" in form.text
        for key in KEYS:
            assert c.get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 403


def test_login_attempts_are_limited_per_client_address(node: FakeNode) -> None:
    with TestClient(fake_app(node, KEYS, OPERATORS, login_attempts_per_minute=3)) as c:
        assert [login(c, "sk-wrong").status_code for _ in range(3)] == [401] * 3
        refused = login(c, "sk-ops")  # past the limit even the right key is not looked at
        assert refused.status_code == 429 and "set-cookie" not in refused.headers
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert "Too many login attempts" in refused.text
        assert c.get("/dashboard", headers={"Authorization": "Bearer sk-ops"}).status_code == 200


def test_the_attempt_limiter_slides_and_keeps_addresses_apart() -> None:
    now = [0.0]
    limiter = AttemptLimiter(2, 60.0, max_clients=3, clock=lambda: now[0])
    assert [limiter.attempt("a") for _ in range(2)] == [0, 0]
    assert limiter.attempt("a") == 60
    assert limiter.attempt("b") == 0  # another address has its own window
    now[0] = 30.0
    assert limiter.attempt("a") == 30  # refused attempts do not extend the wait
    now[0] = 60.0
    assert limiter.attempt("a") == 0  # the first two left the window
    for client in ("c", "d", "e"):
        limiter.attempt(client)
    assert len(limiter) == 3  # the least recently seen addresses were forgotten
    assert AttemptLimiter(0).attempt("a") == 0  # 0: no limit
