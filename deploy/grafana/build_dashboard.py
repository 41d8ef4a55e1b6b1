"""Writes edgeroute-fleet.json, the Grafana dashboard of the fleet: `python deploy/grafana/build_dashboard.py`.

The panels are the fleet page's (`edgeroute dashboard --prometheus`): nodes and their health,
requests/s and route split, cache hit rates, latency and TTFT percentiles, fallbacks, spend and
spend saved, the edge's load, and the vLLM pool members' load. Import it in Grafana
(Dashboards > Import) and pick the Prometheus data source that scrapes the fleet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("edgeroute-fleet.json")
N = 'job="edgeroute"'
M = 'job="vllm"'
R = "$__rate_interval"
# Name series by the node's name (edgeroute_node_info), not its address.
NAMED = f" * on (instance) group_left (node) max by (instance, node) (edgeroute_node_info{{{N}}})"
DS = {"type": "prometheus", "uid": "${datasource}"}


def target(
    expr: str, legend: str, ref: str, *, instant: bool = False, fmt: str = "time_series"
) -> dict[str, Any]:
    return {
        "datasource": DS,
        "expr": expr,
        "legendFormat": legend,
        "refId": ref,
        "instant": instant,
        "format": fmt,
    }


def panel(
    title: str,
    kind: str,
    x: int,
    y: int,
    w: int,
    h: int,
    targets: list[dict[str, Any]],
    unit: str = "short",
    stack: bool = False,
    description: str = "",
) -> dict[str, Any]:
    custom: dict[str, Any] = {}
    if kind == "timeseries":
        custom = {"stacking": {"mode": "normal" if stack else "none"}, "fillOpacity": 30 if stack else 0}
    return {
        "title": title,
        "description": description,
        "type": kind,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
        "options": {},
        "targets": targets,
    }


def quantile(q: float, metric: str) -> str:
    return f"histogram_quantile({q}, sum by (instance, le) (rate({metric}_bucket{{{N}}}[{R}])))" + NAMED


def panels() -> list[dict[str, Any]]:
    hits = f"sum by (instance) (rate(edgeroute_cache_hits_total{{{N}}}[{R}]))"
    misses = f"sum by (instance) (rate(edgeroute_cache_misses_total{{{N}}}[{R}]))"
    return [
        panel("Nodes up", "stat", 0, 0, 4, 4, [target(f"sum(up{{{N}}})", "up", "A", instant=True)]),
        panel(
            "Nodes draining",
            "stat",
            4,
            0,
            4,
            4,
            [target(f"sum(edgeroute_node_draining{{{N}}})", "draining", "A", instant=True)],
        ),
        panel(
            "Requests/s, fleet",
            "stat",
            8,
            0,
            4,
            4,
            [target(f"sum(rate(edgeroute_requests_total{{{N}}}[{R}]))", "req/s", "A")],
            unit="reqps",
        ),
        panel(
            "Cloud spend",
            "stat",
            12,
            0,
            4,
            4,
            [target(f"sum(edgeroute_spend_total{{{N}}})", "spent", "A")],
            unit="currencyUSD",
            description="At the prices of telemetry.prices, since each node started.",
        ),
        panel(
            "Spend saved against all-cloud",
            "stat",
            16,
            0,
            4,
            4,
            [
                target(
                    f"sum(edgeroute_spend_all_cloud_total{{{N}}}) - sum(edgeroute_spend_total{{{N}}})",
                    "saved",
                    "A",
                )
            ],
            unit="currencyUSD",
        ),
        panel(
            "Fallbacks/s",
            "stat",
            20,
            0,
            4,
            4,
            [target(f"sum(rate(edgeroute_fallbacks_total{{{N}}}[{R}]))", "fallbacks/s", "A")],
        ),
        panel(
            "Nodes",
            "table",
            0,
            4,
            24,
            7,
            [
                target(f"up{{{N}}}" + NAMED, "", "A", instant=True, fmt="table"),
                target(
                    f"sum by (instance) (rate(edgeroute_requests_total{{{N}}}[{R}]))" + NAMED,
                    "",
                    "B",
                    instant=True,
                    fmt="table",
                ),
                target(f"edgeroute_node_draining{{{N}}}" + NAMED, "", "C", instant=True, fmt="table"),
                target(
                    f"max by (instance, node, edge_model, edge_model_version, version) (edgeroute_node_info{{{N}}})",
                    "",
                    "D",
                    instant=True,
                    fmt="table",
                ),
            ],
            description="up (1/0), requests/s, draining (1/0) and the edge model of every node.",
        ),
        panel(
            "Requests/s by node",
            "timeseries",
            0,
            11,
            12,
            8,
            [
                target(
                    f"sum by (instance) (rate(edgeroute_requests_total{{{N}}}[{R}]))" + NAMED, "{{node}}", "A"
                )
            ],
            unit="reqps",
        ),
        panel(
            "Route split, fleet",
            "timeseries",
            12,
            11,
            12,
            8,
            [target(f"sum by (route) (rate(edgeroute_requests_total{{{N}}}[{R}]))", "{{route}}", "A")],
            unit="reqps",
            stack=True,
        ),
        panel(
            "Cache hit rate by node",
            "timeseries",
            0,
            19,
            12,
            8,
            [
                target(f"{hits} / ({hits} + {misses})" + NAMED, "{{node}}", "A"),
            ],
            unit="percentunit",
        ),
        panel(
            "Cache hits by kind, fleet",
            "timeseries",
            12,
            19,
            12,
            8,
            [target(f"sum by (kind) (rate(edgeroute_cache_hits_total{{{N}}}[{R}]))", "{{kind}}", "A")],
            unit="reqps",
            stack=True,
        ),
        panel(
            "Latency p50 / p95 by node",
            "timeseries",
            0,
            27,
            12,
            8,
            [
                target(quantile(0.5, "edgeroute_request_latency_seconds"), "{{node}} p50", "A"),
                target(quantile(0.95, "edgeroute_request_latency_seconds"), "{{node}} p95", "B"),
            ],
            unit="s",
        ),
        panel(
            "Time to first token p50 / p95 by node",
            "timeseries",
            12,
            27,
            12,
            8,
            [
                target(quantile(0.5, "edgeroute_ttft_seconds"), "{{node}} p50", "A"),
                target(quantile(0.95, "edgeroute_ttft_seconds"), "{{node}} p95", "B"),
            ],
            unit="s",
        ),
        panel(
            "Fallbacks by kind",
            "timeseries",
            0,
            35,
            12,
            8,
            [target(f"sum by (fallback) (rate(edgeroute_fallbacks_total{{{N}}}[{R}]))", "{{fallback}}", "A")],
        ),
        panel(
            "Edge load by node",
            "timeseries",
            12,
            35,
            12,
            8,
            [
                target(f"edgeroute_edge_running{{{N}}}" + NAMED, "{{node}} running", "A"),
                target(f"edgeroute_edge_queue_depth{{{N}}}" + NAMED, "{{node}} queued", "B"),
                target(f"edgeroute_edge_capacity{{{N}}}" + NAMED, "{{node}} slots", "C"),
            ],
        ),
        panel(
            "Cache wrong-answer bound and budget",
            "timeseries",
            0,
            43,
            12,
            8,
            [
                target(
                    f"max by (instance) (edgeroute_cache_wrong_rate_bound{{{N}}})" + NAMED,
                    "{{node}} bound",
                    "A",
                ),
                target(
                    f"max by (instance) (edgeroute_cache_max_wrong_rate{{{N}}})" + NAMED,
                    "{{node}} budget",
                    "B",
                ),
            ],
            unit="percentunit",
        ),
        panel(
            "Spend by node",
            "timeseries",
            12,
            43,
            12,
            8,
            [
                target(f"sum by (instance) (edgeroute_spend_total{{{N}}})" + NAMED, "{{node}} spent", "A"),
                target(
                    f"(sum by (instance) (edgeroute_spend_all_cloud_total{{{N}}}) - sum by (instance) (edgeroute_spend_total{{{N}}}))"
                    + NAMED,
                    "{{node}} saved",
                    "B",
                ),
            ],
            unit="currencyUSD",
        ),
        panel(
            "vLLM members: running and waiting",
            "timeseries",
            0,
            51,
            12,
            8,
            [
                target(f"sum by (instance) (vllm:num_requests_running{{{M}}})", "{{instance}} running", "A"),
                target(f"sum by (instance) (vllm:num_requests_waiting{{{M}}})", "{{instance}} waiting", "B"),
            ],
        ),
        panel(
            "vLLM members: KV cache usage",
            "timeseries",
            12,
            51,
            12,
            8,
            [
                target(f"max by (instance) (vllm:kv_cache_usage_perc{{{M}}})", "{{instance}}", "A"),
            ],
            unit="percentunit",
        ),
        panel("vLLM members up", "timeseries", 0, 59, 24, 6, [target(f"up{{{M}}}", "{{instance}}", "A")]),
    ]


def dashboard() -> dict[str, Any]:
    items = panels()
    for i, p in enumerate(items, start=1):
        p["id"] = i
    return {
        "title": "edgeroute fleet",
        "uid": "edgeroute-fleet",
        "tags": ["edgeroute", "vllm"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                }
            ]
        },
        "annotations": {"list": []},
        "panels": items,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
