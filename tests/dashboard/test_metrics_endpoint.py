"""``GET /metrics``: Prometheus text that prometheus_client's own parser reads back."""

from __future__ import annotations

from litestar import Litestar
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from dashfakes import FakeNode, event


def families(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_scrape_parses(client: TestClient[Litestar], node: FakeNode) -> None:
    assert node.telemetry is not None and node.pool is not None
    node.telemetry.record(
        event("r1", route="edge", reason="short-prompt", latency_ms=150.0, ttft_ms=30.0, cache="miss")
    )
    node.telemetry.record(
        event("r2", route="cache-semantic", reason="semantic", latency_ms=4.0, similarity=0.95)
    )
    node.telemetry.record(
        event(
            "r3",
            route="edge",
            reason="cloud-unhealthy",
            fallback="cloud->edge",
            cache="miss",
            cache_refusal="negation",
        )
    )
    node.pool.kill("gpu-b")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    got = families(response.text)
    assert (
        got["edgeroute_requests_total"][(("reason", "short-prompt"), ("route", "edge"), ("status", "ok"))]
        == 1
    )
    assert (
        got["edgeroute_requests_total"][
            (("reason", "semantic"), ("route", "cache-semantic"), ("status", "ok"))
        ]
        == 1
    )
    assert got["edgeroute_request_latency_seconds_count"][(("route", "edge"),)] == 2
    assert (
        got["edgeroute_request_latency_seconds_bucket"][(("le", "0.005"), ("route", "cache-semantic"))] == 1
    )
    assert got["edgeroute_ttft_seconds_count"][(("route", "edge"),)] == 2
    assert got["edgeroute_cache_hits_total"][(("kind", "semantic"),)] == 1
    assert got["edgeroute_cache_misses_total"][()] == 2
    assert got["edgeroute_cache_refusals_total"][(("reason", "negation"),)] == 1
    assert got["edgeroute_fallbacks_total"][(("fallback", "cloud->edge"),)] == 1
    assert got["edgeroute_edge_queue_depth"][()] == 3
    assert got["edgeroute_pool_member_up"] == {(("member", "gpu-a"),): 1.0, (("member", "gpu-b"),): 0.0}
    assert got["edgeroute_pool_member_circuit"][(("member", "gpu-b"), ("state", "open"))] == 1
    assert got["edgeroute_pool_member_outstanding"][(("member", "gpu-b"),)] == 3
