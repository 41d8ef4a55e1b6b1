"""The PromQL behind every figure of the fleet page (the Grafana dashboard uses the same).

Instant queries, one per figure; each result is a vector keyed by ``instance``. Requests, route
split, cache hits and fallbacks are totals since each node started; rates, percentiles and
degraded answers are over the windows.
"""

from __future__ import annotations

from .config import FleetSettings


def _quantile(q: float, metric: str, sel: str, window: str) -> str:
    return f"histogram_quantile({q}, sum by (instance, le) (rate({metric}_bucket{{{sel}}}[{window}])))"


def node_queries(settings: FleetSettings) -> dict[str, str]:
    sel, w, r = f'job="{settings.nodes_job}"', settings.window, settings.rate_window
    return {
        "up": f"up{{{sel}}}",
        # A node that died keeps its name on the page for an hour.
        "info": f"last_over_time(edgeroute_node_info{{{sel}}}[1h])",
        "draining": f"edgeroute_node_draining{{{sel}}}",
        "requests_total": f"sum by (instance) (edgeroute_requests_total{{{sel}}})",
        "requests_per_s": f"sum by (instance) (rate(edgeroute_requests_total{{{sel}}}[{r}]))",
        # Counts since each node started, straight from its counters: they match the node's
        # own /metrics and dashboard exactly (increase() would miss a series' first value).
        "routes": f"sum by (instance, route) (edgeroute_requests_total{{{sel}}})",
        "routes_window": f"sum by (instance, route) (increase(edgeroute_requests_total{{{sel}}}[{w}]))",
        "hits": f"sum by (instance, kind) (edgeroute_cache_hits_total{{{sel}}})",
        "misses": f"sum by (instance) (edgeroute_cache_misses_total{{{sel}}})",
        "latency_p50": _quantile(0.5, "edgeroute_request_latency_seconds", sel, w),
        "latency_p95": _quantile(0.95, "edgeroute_request_latency_seconds", sel, w),
        "ttft_p50": _quantile(0.5, "edgeroute_ttft_seconds", sel, w),
        "ttft_p95": _quantile(0.95, "edgeroute_ttft_seconds", sel, w),
        "fallbacks": f"sum by (instance) (edgeroute_fallbacks_total{{{sel}}})",
        "degraded": f"sum by (instance) (increase(edgeroute_degraded_total{{{sel}}}[{w}]))",
        "spend": f"sum by (instance, currency) (edgeroute_spend_total{{{sel}}})",
        "spend_all_cloud": f"sum by (instance, currency) (edgeroute_spend_all_cloud_total{{{sel}}})",
        "edge_running": f"edgeroute_edge_running{{{sel}}}",
        "edge_waiting": f"edgeroute_edge_queue_depth{{{sel}}}",
        "edge_capacity": f"edgeroute_edge_capacity{{{sel}}}",
        "pool_members": f"count by (instance) (edgeroute_pool_member_up{{{sel}}})",
        "pool_healthy": f"edgeroute_pool_healthy_members{{{sel}}}",
    }


def member_queries(settings: FleetSettings) -> dict[str, str]:
    """vLLM's own series (vLLM 0.32: labels ``model_name`` and ``engine``)."""
    sel, w, r = f'job="{settings.members_job}"', settings.window, settings.rate_window
    return {
        "up": f"up{{{sel}}}",
        "running": f"sum by (instance, model_name) (vllm:num_requests_running{{{sel}}})",
        "waiting": f"sum by (instance, model_name) (vllm:num_requests_waiting{{{sel}}})",
        "kv_cache": f"max by (instance, model_name) (vllm:kv_cache_usage_perc{{{sel}}})",
        "requests_per_s": f"sum by (instance) (rate(vllm:request_success_total{{{sel}}}[{r}]))",
        "ttft_p95": _quantile(0.95, "vllm:time_to_first_token_seconds", sel, w),
    }
