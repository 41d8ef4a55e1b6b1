"""The fleet view from Prometheus's answers, its client's errors, and the app without Prometheus."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from litestar.serialization import encode_json
from litestar.testing import TestClient

from dashboard.fleet import FleetSettings, create_fleet_app
from dashboard.fleet.prom import Prometheus, PrometheusUnavailableError, Sample
from dashboard.fleet.queries import member_queries, node_queries
from dashboard.fleet.view import FleetView, build_members, build_nodes, dashboard_url
from loadtest.servers import free_port
from router import ServerSettings

A, B, C = "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"


def s(value: float | None, **labels: str) -> Sample:
    return Sample(labels, value)


RESULTS = {
    "up": [s(1, instance=A), s(1, instance=B), s(0, instance=C)],
    "info": [
        s(
            1,
            instance=A,
            node="store-a",
            edge_model="smollm2",
            edge_model_version="abc",
            version="0.1.0",
            dashboard_path="/dashboard",
        ),
        s(
            1,
            instance=B,
            node="store-b",
            edge_model="smollm2",
            edge_model_version="abc",
            version="0.1.0",
            dashboard_path="",
        ),
    ],
    "draining": [s(0, instance=A), s(1, instance=B)],
    "requests_total": [s(10, instance=A), s(5, instance=B)],
    "routes": [
        s(6, instance=A, route="edge"),
        s(3, instance=A, route="cache-exact"),
        s(1, instance=A, route="cache-semantic"),
    ],
    "hits": [s(3, instance=A, kind="exact"), s(1, instance=A, kind="semantic")],
    "misses": [s(4, instance=A)],
    "spend": [s(0.25, instance=A, currency="EUR")],
    "spend_all_cloud": [s(1.0, instance=A)],
    "edge_running": [s(8, instance=A), s(1, instance=B)],
    "edge_waiting": [s(2, instance=A), s(0, instance=B)],
    "edge_capacity": [s(8, instance=A), s(8, instance=B)],
    "pool_members": [s(2, instance=A)],
    "pool_healthy": [s(0, instance=A)],
    "ttft_p95": [s(0.125, instance=A), s(None, instance=B)],
}


def test_nodes_health_rates_and_spend() -> None:
    rows = build_nodes(RESULTS, {A: "https://10.0.0.1:8080/metrics", B: "http://10.0.0.2:8080/metrics"})
    assert [r.instance for r in rows] == [C, A, B]  # by name; the nameless one by its address
    down, a, b = rows
    assert (down.node, down.up, down.health, down.requests_total) == (C, False, "down", None)
    assert (a.node, a.health) == ("store-a", "degraded")
    assert a.degraded_reasons == ["no healthy cloud member", "edge saturated"]
    assert (b.health, b.degraded_reasons) == ("draining", [])
    assert a.cache_hit_rate == pytest.approx(4 / 8)
    assert (a.cache_exact_hit_rate, a.cache_semantic_hit_rate) == (pytest.approx(3 / 8), pytest.approx(1 / 8))
    assert b.cache_hit_rate is None  # no lookups at all
    assert (a.currency, a.spend, a.spend_saved) == ("EUR", 0.25, 0.75)
    assert a.ttft_p95_ms == 125.0 and b.ttft_p95_ms is None
    assert a.dashboard_url == "https://10.0.0.1:8080/dashboard"
    assert b.dashboard_url is None  # the node serves no dashboard
    assert (a.pool_members, a.pool_healthy) == (2, 0)
    body = json.loads(encode_json(rows))  # the API's body, as Litestar encodes it
    assert body[0]["instance"] == rows[0].instance and body[0]["degraded_reasons"] == rows[0].degraded_reasons


def test_fleet_totals() -> None:
    rows = build_nodes(RESULTS, {})
    view = FleetView(at=0.0, nodes=rows)
    assert view.nodes_up == 2
    assert view.routes == {"cache-exact": 3, "cache-semantic": 1, "edge": 6, "cloud": 0, "error": 0}
    assert view.cache_hit_rate == pytest.approx(0.5)
    assert (view.currency, view.spend, view.spend_saved) == ("EUR", 0.25, 0.75)


def test_members_one_row_per_model() -> None:
    results = {
        "up": [s(1, instance="gpu-1:8000"), s(0, instance="gpu-2:8000")],
        "running": [
            s(3, instance="gpu-1:8000", model_name="big"),
            s(1, instance="gpu-1:8000", model_name="small"),
        ],
        "waiting": [s(2, instance="gpu-1:8000", model_name="big")],
        "kv_cache": [s(0.5, instance="gpu-1:8000", model_name="big")],
        "ttft_p95": [s(0.2, instance="gpu-1:8000")],
    }
    rows = build_members(results)
    assert [(r.instance, r.model, r.up, r.running, r.waiting, r.kv_cache_usage) for r in rows] == [
        ("gpu-1:8000", "big", True, 3, 2, 0.5),
        ("gpu-1:8000", "small", True, 1, None, None),
        ("gpu-2:8000", "", False, None, None, None),
    ]
    assert rows[0].ttft_p95_ms == 200.0


@pytest.mark.parametrize(
    ("scrape", "path", "expected"),
    [
        ("http://h:1/metrics", "/dashboard", "http://h:1/dashboard"),
        ("https://h.example/metrics", "/ops/dash", "https://h.example/ops/dash"),
        (None, "/dashboard", None),
        ("http://h:1/metrics", "", None),
        ("ftp://h/metrics", "/dashboard", None),
        ("http://user:secret@h:1/metrics", "/dashboard", "http://h:1/dashboard"),  # credentials: not shown
        ("http://[::1]:8080/metrics", "/dashboard", "http://[::1]:8080/dashboard"),
    ],
)
def test_dashboard_url(scrape: str | None, path: str, expected: str | None) -> None:
    assert dashboard_url(scrape, path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "@evil.example/",  # glued to the host: http://h:1@evil.example/
        "/@evil.example/",
        "//evil.example/dashboard",  # a protocol-relative URL to a browser
        "/ops//evil.example",
        "https://evil.example/dashboard",
        "javascript:alert(1)",
        "dashboard",  # not absolute
        "/\\evil.example",  # browsers read a backslash as "/"
        "/dash\\board",
        "/dash board",
        "/dash\tboard",
        "/dash\nboard",
        "/dash\x00board",
        "/dash\x7fboard",
        "/dashbörd",
    ],
)
def test_a_scraped_dashboard_path_that_is_not_a_plain_path_gets_no_link(path: str) -> None:
    assert dashboard_url("http://h:1/metrics", path) is None


def test_a_target_exposing_another_host_as_its_dashboard_path_is_listed_without_a_link() -> None:
    results = {
        "up": [s(1, instance=A)],
        "info": [s(1, instance=A, node="edge-a", edge_model="smollm2", dashboard_path="@evil.example/")],
    }
    from dashboard.fleet.routes import nodes_html

    (row,) = build_nodes(results, {A: "http://10.0.0.1:8080/metrics"})
    assert (row.node, row.dashboard_url) == ("edge-a", None)
    html = nodes_html(FleetView(at=0.0, nodes=[row]))
    assert 'data-field="link"' not in html and "evil.example" not in html


def test_queries_select_the_jobs() -> None:
    q = FleetSettings(
        prometheus_url="http://p:9090", nodes_job="edge-nodes", members_job="gpus", window="10m", rate_window="30s"
    )
    assert node_queries(q)["up"] == 'up{job="edge-nodes"}'
    assert (
        node_queries(q)["requests_per_s"]
        == 'sum by (instance) (rate(edgeroute_requests_total{job="edge-nodes"}[30s]))'
    )
    assert member_queries(q)["kv_cache"] == 'max by (instance, model_name) (vllm:kv_cache_usage_perc{job="gpus"})'


def test_settings_refuse_what_would_break_a_query() -> None:
    with pytest.raises(ValueError, match="nodes_job"):
        FleetSettings(prometheus_url="http://p:9090", nodes_job='x"} or vector(1) #')
    with pytest.raises(ValueError, match="window"):
        FleetSettings(prometheus_url="http://p:9090", window="5 minutes")


def _prom(handler: object) -> Prometheus:
    return Prometheus("http://prom:9090", transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


def test_client_reads_vectors_and_nan() -> None:
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"instance": "a"}, "value": [1, "2.5"]},
                {"metric": {"instance": "b"}, "value": [1, "NaN"]},
            ],
        },
    }
    got = asyncio.run(_prom(lambda request: httpx.Response(200, json=body)).query("up"))
    assert got == [Sample({"instance": "a"}, 2.5), Sample({"instance": "b"}, None)]


def test_client_translates_a_query_error() -> None:
    body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    with pytest.raises(PrometheusUnavailableError, match="400: parse error at char 3"):
        asyncio.run(_prom(lambda request: httpx.Response(400, json=body)).query("up{"))


def test_client_translates_a_non_json_answer() -> None:
    with pytest.raises(PrometheusUnavailableError, match="502 and no JSON"):
        asyncio.run(_prom(lambda request: httpx.Response(502, text="bad gateway")).query("up"))


def _app_without_prometheus() -> TestClient:  # type: ignore[type-arg]
    settings = FleetSettings(prometheus_url=f"http://127.0.0.1:{free_port()}", max_age_s=0)
    server = ServerSettings(operator_keys=["op"], api_keys={"tenant-key": "acme"})
    return TestClient(create_fleet_app(settings, server))


def test_prometheus_down_is_a_503_and_a_notice() -> None:
    with _app_without_prometheus() as client:
        op = {"authorization": "Bearer op"}
        answer = client.get("/fleet/api/nodes", headers=op)
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "prometheus_unavailable"
        assert (answer.json()["error"]["type"], answer.headers["retry-after"]) == ("service_unavailable", "5")
        assert "did not answer: ConnectError" in answer.json()["error"]["message"]
        page = client.get("/fleet", headers=op)
        assert page.status_code == 200
        assert 'id="fleet-error"' in page.text


def test_tenant_key_is_refused_everywhere() -> None:
    with _app_without_prometheus() as client:
        for path in ("/fleet", "/fleet/api/nodes", "/fleet/api/members", "/fleet/events"):
            answer = client.get(path, headers={"authorization": "Bearer tenant-key"})
            assert answer.status_code == 403, path
            assert answer.json()["error"]["code"] == "operator_key_required"
        assert client.get("/fleet/api/nodes").status_code == 401
        login = client.get("/fleet", follow_redirects=False)
        assert (login.status_code, login.headers["location"]) == (303, "/fleet/login?next=/fleet")
        assert client.get("/", follow_redirects=False).headers["location"] == "/fleet"


def test_nodes_panel_renders_each_node_escaped() -> None:
    from dashboard.fleet.routes import members_html, nodes_html

    results = dict(RESULTS)
    results["info"] = [
        *RESULTS["info"][1:],
        s(1, instance=A, node="<script>x</script>", edge_model="smollm2", dashboard_path="/dashboard"),
    ]
    view = FleetView(at=0.0, nodes=build_nodes(results, {A: "http://10.0.0.1:8080/metrics"}))
    html = nodes_html(view)
    rows = re.findall(r'<tr class="node (\w+)" data-instance="([^"]+)"', html)
    assert sorted(rows) == sorted([("degraded", A), ("draining", B), ("down", C)])
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert '<a href="http://10.0.0.1:8080/dashboard" data-field="link">' in html
    assert 'id="fleet-up">2 / 3<' in html
    assert 'id="fleet-no-members"' in members_html(view)
