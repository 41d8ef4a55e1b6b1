"""The fleet view on real parts: Debian's Prometheus scraping three real nodes and a pool member.

Three `edgeroute serve` processes (each its own data dir and name) and a vLLM pool member (its
/metrics carry vLLM's load gauges; the session's, shared with the cloud tests) run on loopback;
Prometheus scrapes them every second with an operator key and evaluates the shipped alert rules;
`edgeroute dashboard --prometheus` serves the fleet page. The last test kills a node, so the order matters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browserkit import Tab
from playwright.sync_api import expect
from prometheus_client.parser import text_string_to_metric_families
from promkit import ensure_prometheus

from cloud.local import LocalMember
from loadtest.fleet import Fleet, send_traffic

pytestmark = [pytest.mark.slow]

INTERVAL_S = 1.0
OPERATOR = {"authorization": "Bearer fleet-operator-key"}
TENANT = {"authorization": "Bearer fleet-tenant-key"}
# What may pass between a change and the API showing it: the scrape that sees it (one interval),
# the dashboard's shared result (max_age_s, 1 s) and the queries themselves.
SETTLE_S = 2 * INTERVAL_S + 1.0 + 1.0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, member: LocalMember) -> Iterator[Fleet]:
    ensure_prometheus()
    running = Fleet(tmp_path_factory.mktemp("fleet"), nodes=3, interval_s=INTERVAL_S, running_member=member)
    try:
        running.start()
        # 4, 8 and 12 requests: each node's counts differ, so a mix-up between nodes shows.
        for i in range(3):
            send_traffic(running.node_url(i), "fleet-tenant-key", rounds=i + 1, cloud=True)
        yield running
    finally:
        running.stop()


def own_requests(fleet: Fleet, i: int) -> float:
    """edgeroute_requests_total summed, from the node's own /metrics."""
    text = httpx.get(fleet.node_url(i) + "/metrics", headers=OPERATOR, timeout=10).text
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "edgeroute_requests_total"
    )


def api_nodes(fleet: Fleet) -> list[dict[str, Any]]:
    response = httpx.get(fleet.dashboard_url + "/fleet/api/nodes", headers=OPERATOR, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def wait_for(check: Any, within_s: float) -> Any:
    """``check()``'s last value once it is truthy, or after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_api_lists_three_nodes_up_with_their_own_counts(fleet: Fleet) -> None:
    own = {fleet.node_addrs[i]: own_requests(fleet, i) for i in range(3)}
    assert sorted(own.values()) == [4.0, 8.0, 12.0]

    def matches() -> list[dict[str, Any]] | None:
        nodes = api_nodes(fleet)
        counted = {n["instance"]: n["requests_total"] for n in nodes} == own
        # Windowed figures (rates, percentiles) need a scrape on each side of the traffic.
        windowed = all(n["ttft_p95_ms"] is not None and n["requests_per_s"] is not None for n in nodes)
        return nodes if counted and windowed else None

    nodes = wait_for(matches, SETTLE_S) or api_nodes(fleet)
    assert {n["instance"]: n["requests_total"] for n in nodes} == own
    assert [n["node"] for n in nodes] == ["edge-1", "edge-2", "edge-3"]
    for i, n in enumerate(nodes):
        assert n["instance"] == fleet.node_addrs[i]
        assert (n["up"], n["health"]) == (True, "up")
        assert sum(n["routes"].values()) == n["requests_total"]
        assert set(n["routes"]) <= {"cache-exact", "cache-semantic", "edge", "cloud", "error"}
        assert n["edge_model"] == "smollm2-135m-instruct"
        assert re.fullmatch(r"[0-9a-f]{12}", n["edge_model_version"])
        assert n["dashboard_url"] == fleet.node_url(i) + "/dashboard"
        assert n["ttft_p95_ms"] is not None and n["ttft_p95_ms"] > 0
        assert 0.0 <= n["cache_hit_rate"] <= 1.0
        assert n["requests_per_s"] is not None


def test_hit_rate_is_the_nodes_own(fleet: Fleet) -> None:
    """The fleet's hit rate is hits / (hits + misses) of the node's own counters."""
    nodes = {n["instance"]: n for n in api_nodes(fleet)}
    for i in range(3):
        text = httpx.get(fleet.node_url(i) + "/metrics", headers=OPERATOR, timeout=10).text
        values = {
            (s.name, s.labels.get("kind")): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
        }
        hits = values.get(("edgeroute_cache_hits_total", "exact"), 0.0) + values.get(
            ("edgeroute_cache_hits_total", "semantic"), 0.0
        )
        misses = values.get(("edgeroute_cache_misses_total", None), 0.0)
        assert nodes[fleet.node_addrs[i]]["cache_hit_rate"] == pytest.approx(hits / (hits + misses))


def test_members_show_the_member_own_load(fleet: Fleet) -> None:
    response = httpx.get(fleet.dashboard_url + "/fleet/api/members", headers=OPERATOR, timeout=30)
    assert response.status_code == 200
    members = response.json()
    assert [m["instance"] for m in members] == [fleet.member_addr]
    member = members[0]
    assert member["up"] is True
    assert member["model"] != ""
    assert (member["running"], member["waiting"]) == (0.0, 0.0)  # nobody sends it work


def test_operator_keys_only(fleet: Fleet) -> None:
    for path in ("/fleet/api/nodes", "/fleet/api/members", "/fleet", "/fleet/events"):
        tenant = httpx.get(fleet.dashboard_url + path, headers=TENANT, timeout=10)
        assert tenant.status_code == 403, path
        assert tenant.json()["error"]["code"] == "operator_key_required"
        assert httpx.get(fleet.dashboard_url + path, timeout=10).status_code in (401, 303), path
    no_key = httpx.get(fleet.dashboard_url + "/fleet/api/nodes", timeout=10)
    assert no_key.status_code == 401


def test_grafana_queries_run_on_prometheus(fleet: Fleet) -> None:
    """Every query of the shipped Grafana dashboard is PromQL this Prometheus accepts."""
    import json

    board = json.loads(
        (Path(__file__).resolve().parents[2] / "deploy/grafana/edgeroute-fleet.json").read_text()
    )
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert len(exprs) >= 20
    for expr in exprs:
        answer = httpx.get(
            fleet.prometheus_url + "/api/v1/query",
            params={"query": expr.replace("$__rate_interval", "1m")},
            timeout=10,
        )
        assert answer.status_code == 200, (expr, answer.text)


@pytest.mark.browser
def test_fleet_page_in_chromium_matches_each_node(fleet: Fleet, tab: Tab) -> None:
    page = tab.page
    page.goto(fleet.dashboard_url + "/fleet")
    page.fill("#key", "fleet-operator-key")
    page.click("form.login button[type=submit]")
    tab.wait_live()
    rows = page.locator("#fleet-node-table tr.node")
    expect(rows).to_have_count(3)
    for i in range(3):
        row = page.locator(f'#fleet-node-table tr.node[data-instance="{fleet.node_addrs[i]}"]')
        expect(row.locator('[data-field="health"]')).to_have_text("up")
        # The drill-down opens the node's own dashboard; a session is its process's own, so the
        # operator logs in there with the same key.
        own = tab.context.new_page()
        own.goto(fleet.node_url(i) + "/dashboard")
        own.fill("#key", "fleet-operator-key")
        own.click("form.login button[type=submit]")
        own.wait_for_url(fleet.node_url(i) + "/dashboard")
        total = own.inner_text("#stat-total")
        # The node is younger than its dashboard's window: its window rates are its totals' rates.
        exact, semantic = own.inner_text("#stat-exact"), own.inner_text("#stat-semantic")
        own.close()
        expect(row.locator('[data-field="requests"]')).to_have_text(total, timeout=int(SETTLE_S * 1000))
        expect(row.locator('[data-field="exact"]')).to_have_text(exact)
        expect(row.locator('[data-field="semantic"]')).to_have_text(semantic)
        assert row.locator('a[data-field="link"]').get_attribute("href") == fleet.node_url(i) + "/dashboard"
    expect(page.locator("#fleet-up")).to_have_text("3 / 3")
    # Live: more traffic to one node shows on the open page, without a reload.
    page.evaluate("window.__sameDocument = true")
    first = page.locator(
        f'#fleet-node-table tr.node[data-instance="{fleet.node_addrs[0]}"] [data-field="requests"]'
    )
    before = int(first.inner_text())
    sent = send_traffic(fleet.node_url(0), "fleet-tenant-key", rounds=1)
    expect(first).to_have_text(str(before + sent), timeout=int((SETTLE_S + INTERVAL_S) * 1000))
    assert page.evaluate("window.__sameDocument") is True
    expect(
        page.locator(
            f'#fleet-member-table tr.member[data-instance="{fleet.member_addr}"] [data-field="health"]'
        )
    ).to_have_text("up")
    tab.shot("fleet", full_page=True)
    assert tab.errors == []


def test_killed_node_is_down_and_alerted_within_two_scrapes(fleet: Fleet) -> None:
    victim = fleet.node_addrs[2]
    fleet.node_procs[2].kill()
    killed_at = time.monotonic()

    def down() -> bool:
        return any(n["instance"] == victim and not n["up"] for n in api_nodes(fleet))

    def firing() -> list[dict[str, Any]]:
        alerts = httpx.get(fleet.prometheus_url + "/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return [
            a for a in alerts if a["labels"]["alertname"] == "EdgerouteNodeDown" and a["state"] == "firing"
        ]

    assert wait_for(down, SETTLE_S)
    alerts = wait_for(firing, SETTLE_S)
    seen_s = time.monotonic() - killed_at
    assert [a["labels"]["instance"] for a in alerts] == [victim]
    nodes = {n["instance"]: n for n in api_nodes(fleet)}
    assert (nodes[victim]["health"], nodes[victim]["node"]) == ("down", "edge-3")  # still named
    assert [nodes[a]["health"] for a in fleet.node_addrs[:2]] == ["up", "up"]
    # On Prometheus's own clock: the alert went active within two scrape intervals of the last
    # scrape that still saw the node up.
    series = httpx.get(
        fleet.prometheus_url + "/api/v1/query",
        params={"query": f'up{{job="edgeroute", instance="{victim}"}}[60s]'},
        timeout=10,
    ).json()["data"]["result"][0]["values"]
    last_up = max(float(t) for t, v in series if v == "1")
    active_at = _rfc3339(alerts[0]["activeAt"])
    # (0.25 s for a loaded box: a rule evaluation may run before the failed scrape is stored.)
    assert last_up < active_at <= last_up + 2 * INTERVAL_S + 0.25
    print(
        f"down and firing seen {seen_s:.1f}s after the kill; alert active {active_at - last_up:.2f}s after the last up scrape"
    )


def _rfc3339(text: str) -> float:
    from datetime import datetime

    whole, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float(f"0.{frac or 0}")


def test_draining_node_shows_draining(fleet: Fleet) -> None:
    """After SIGTERM the node keeps answering /metrics, so the fleet sees it draining, not down."""
    import signal
    import socket

    node = fleet.node_procs[1]
    host, port = fleet.node_addrs[1].split(":")
    # A request whose body is still on its way holds the drain open (it counts as in flight).
    with socket.create_connection((host, int(port)), timeout=10) as slow:
        slow.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer fleet-tenant-key\r\n"
            b"content-type: application/json\r\ncontent-length: 200\r\n\r\n{"
        )
        time.sleep(0.3)
        assert node.proc is not None
        node.proc.send_signal(signal.SIGTERM)

        def own_draining() -> str:
            text = httpx.get(fleet.node_url(1) + "/metrics", headers=OPERATOR, timeout=10).text
            return next(
                (line for line in text.splitlines() if line.startswith("edgeroute_node_draining ")), ""
            )

        assert wait_for(lambda: own_draining() == "edgeroute_node_draining 1.0", 5.0)
        refused = httpx.post(fleet.node_url(1) + "/v1/chat/completions", headers=TENANT, json={}, timeout=10)
        assert refused.status_code == 503

        def draining() -> bool:
            return any(
                n["instance"] == fleet.node_addrs[1] and n["health"] == "draining" for n in api_nodes(fleet)
            )

        assert wait_for(draining, SETTLE_S)
        nodes = {n["instance"]: n for n in api_nodes(fleet)}
        assert nodes[fleet.node_addrs[1]]["up"] is True
    # The client gave up: nothing holds the drain, the node exits 0.
    assert node.proc.wait(60) == 0
