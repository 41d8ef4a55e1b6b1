"""The dashboard's pages and fragments, rendered against in-memory fakes of the node's parts."""

from __future__ import annotations

import re
from pathlib import Path

from litestar import Litestar
from litestar.testing import TestClient

from dashfakes import FakeNode, event, fake_app, make_telemetry

SCRIPT = "<script>alert('pwned')</script>"


def test_overview_shows_counters_and_charts(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.telemetry is not None
    node.telemetry.record(event("r1", route="edge", cache="miss"))
    node.telemetry.record(event("r2", route="cache-exact"))
    node.telemetry.record(
        event("r3", route="cloud", reason="complex", fallback="member-a->member-b", cache="miss")
    )
    page = client.get("/dashboard")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert re.search(r'id="stat-total">3<', html)
    assert re.search(r'id="stat-exact">33\.3%<', html)
    assert re.search(r'id="split-cloud">1<', html)
    assert 'sse-connect="/dashboard/events?topics=stats,feed"' in html
    assert html.count('<svg viewBox="0 0 1000 200"') == 2  # route split over time, latency distribution
    assert 'class="r-cloud"' in html
    assert "member-a-&gt;member-b" in html


def test_overview_shows_the_first_token_prediction_error(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.telemetry is not None
    for i, ttft in enumerate((100.0, 125.0, 200.0)):  # predicted 0.1 s: errors 0%, 20%, 50%
        node.telemetry.record(event(f"r{i}", stream=True, ttft_ms=ttft, features={"edge_ttft_s": 0.1}))
    node.telemetry.record(event("r9", stream=True, ttft_ms=80.0))  # no prediction: not counted
    html = client.get("/dashboard").text
    assert re.search(r'id="stat-prediction-error">20%</strong>, p95 50%, over 3 answers', html)


def test_pages_load_their_vendored_scripts_only(client: TestClient[Litestar]) -> None:
    for path in ("/dashboard", "/dashboard/feed", "/dashboard/pool", "/dashboard/cache"):
        page = client.get(path)
        assert page.status_code == 200, path
        scripts = re.findall(r'<script src="([^"]+)"', page.text)
        assert scripts == [
            "/dashboard/static/vendor/htmx.min.js",
            "/dashboard/static/vendor/sse.js",
            "/dashboard/static/app.js",
        ]
        assert "<script>" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    for path in scripts + ["/dashboard/static/app.css", "/dashboard/static/favicon.svg"]:
        assert client.get(path).status_code == 200, path


def test_user_text_is_escaped_everywhere(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.telemetry is not None
    node.telemetry.record(
        event("evil", tenant=f"t{SCRIPT}", reason=f"r{SCRIPT}", prompt_preview=SCRIPT, features={"x": SCRIPT})
    )
    for path in ("/dashboard", "/dashboard/feed", "/dashboard/requests/evil", "/dashboard/feed/rows"):
        html = client.get(path).text
        assert SCRIPT not in html, path
        assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html, path


def test_feed_rows_open_their_details(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.telemetry is not None
    node.telemetry.record(
        event("r1", route="cache-semantic", reason="semantic", similarity=0.9531, cache_refusal=None)
    )
    node.telemetry.record(
        event("r2", route="edge", private=True, prompt_preview="my secret", complexity=0.25)
    )
    html = client.get("/dashboard/feed").text
    rows = re.findall(r'<tr id="req-([^"]+)"', html)
    assert rows == ["r2", "r1"]
    assert 'hx-get="/dashboard/requests/r1"' in html
    assert "sim 0.953" in html
    assert "my secret" not in html and "(private)" in html
    details = client.get("/dashboard/requests/r2").text
    assert "Private request: the prompt is not recorded." in details
    assert "<dd>0.2500</dd>" in details
    semantic = client.get("/dashboard/requests/r1").text
    assert "cache-semantic" in semantic and "0.9531" in semantic
    assert "complexity" in semantic and "prompt_tokens" in semantic  # the features table
    assert "No decision with request id <code>zzz</code>" in client.get("/dashboard/requests/zzz").text


def test_pool_page_shows_member_health(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.pool is not None
    node.pool.kill("gpu-b")
    html = client.get("/dashboard/pool").text
    row_a = re.search(r'<tr class="member up" data-member="gpu-a">.*?</tr>', html, re.S)
    row_b = re.search(r'<tr class="member down" data-member="gpu-b">.*?</tr>', html, re.S)
    assert row_a and ">up</span>" in row_a.group(0) and "circuit-closed" in row_a.group(0)
    assert row_b and ">down</span>" in row_b.group(0) and "circuit-open" in row_b.group(0)
    assert "1 of 2 members healthy." in html
    assert re.search(r'id="edge-waiting">3<', html)


def test_cache_page_stats_search_and_delete(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.telemetry is not None and node.cache is not None
    node.telemetry.record(event("r1", cache="miss", cache_refusal="negation"))
    node.telemetry.record(event("r2", cache="miss", cache_refusal="negation"))
    html = client.get("/dashboard/cache").text
    assert re.search(r'id="cache-entries">3<', html)
    assert re.search(r'id="cache-evictions">4<', html)
    assert re.search(r"<td>acme</td><td class=\"num\">2</td>", html)
    assert re.search(r"<td>negation</td><td class=\"num\">2</td>", html)
    assert "<th>threshold</th>" in html  # other counters the cache reports

    found = client.get("/dashboard/cache/search", params={"q": "capital", "tenant": "globex"}).text
    assert re.findall(r'data-entry-id="(\d+)"', found) == ["3"]
    both = client.get("/dashboard/cache", params={"q": "tcp"}).text
    assert re.findall(r'data-entry-id="(\d+)"', both) == ["2"]
    assert "Explain &lt;b&gt;TCP&lt;/b&gt; slow start" in both
    nothing = client.get("/dashboard/cache/search", params={"q": "nothing"}).text
    assert "No entry matches “nothing”" in nothing

    refused = client.post("/dashboard/cache/entries/3/delete")
    assert refused.status_code == 403 and 3 in node.cache.entries
    deleted = client.post("/dashboard/cache/entries/3/delete", headers={"HX-Request": "true"})
    assert deleted.status_code == 200 and "Entry 3 deleted." in deleted.text
    assert 3 not in node.cache.entries
    again = client.post("/dashboard/cache/entries/3/delete", headers={"HX-Request": "true"})
    assert "Entry 3 was already gone." in again.text


def test_missing_parts_render_not_configured(tmp_path: Path) -> None:
    bare = FakeNode(make_telemetry(tmp_path / "d"))
    with TestClient(fake_app(bare)) as c:
        assert 'id="pool-not-configured"' in c.get("/dashboard/pool").text
        assert "No edge engine on this node." in c.get("/dashboard/pool").text
        cache = c.get("/dashboard/cache").text
        assert 'id="cache-not-configured"' in cache and 'name="q"' not in cache
        assert "not configured" in c.get("/dashboard/cache/search", params={"q": "x"}).text
        assert c.post("/dashboard/cache/entries/1/delete", headers={"HX-Request": "true"}).status_code == 200
    without = FakeNode(None)
    with TestClient(fake_app(without)) as c:
        assert "Telemetry is not configured" in c.get("/dashboard").text
        assert "No requests yet." in c.get("/dashboard/feed").text
        assert c.get("/metrics").text == ""


def test_dashboard_path_and_switch(tmp_path: Path) -> None:
    moved = FakeNode(make_telemetry(tmp_path / "a", dashboard={"path": "/ops/board"}))
    with TestClient(fake_app(moved)) as c:
        html = c.get("/ops/board").text
        assert 'href="/ops/board/static/app.css"' in html and 'sse-connect="/ops/board/events' in html
        assert c.get("/dashboard").status_code == 404
    off = FakeNode(make_telemetry(tmp_path / "b", dashboard={"enabled": False}))
    with TestClient(fake_app(off)) as c:
        assert c.get("/dashboard").status_code == 404
        assert c.get("/metrics").status_code == 200


def test_formatting_and_chart_geometry() -> None:
    from dashboard.charts import nice_max, share_bar
    from dashboard.render import fmt_duration, fmt_money, fmt_ms

    assert [nice_max(v) for v in (0, 1, 3, 7, 12, 50, 51)] == [1, 1, 5, 10, 20, 50, 100]
    assert [fmt_ms(v) for v in (None, 3.14159, 250.4, 1234.0, 12345.0)] == [
        "–",
        "3.1 ms",
        "250 ms",
        "1.23 s",
        "12.3 s",
    ]
    assert [fmt_duration(v) for v in (45, 60, 150, 300, 3600)] == ["45s", "1m", "2m30s", "5m", "1h"]
    assert fmt_money(0.0000625) == "0.000063 USD" and fmt_money(1234.5, "EUR") == "1,234.50 EUR"
    segs = share_bar({"edge": 3, "cloud": 1}, width=1000)
    assert [(s.route, s.x, s.width, s.pct) for s in segs] == [
        ("edge", 0.0, 750.0, 75.0),
        ("cloud", 750.0, 250.0, 25.0),
    ]
