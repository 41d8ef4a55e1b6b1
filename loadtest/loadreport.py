"""The arithmetic and the table of ``edgeroute bench load`` (:mod:`loadtest.loadgen` runs the load)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from .config import LoadConfig, Result


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "n": 0}
    if len(values) == 1:
        return {"p50": values[0], "p95": values[0], "p99": values[0], "n": 1}
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": statistics.median(values), "p95": q[94], "p99": q[98], "n": len(values)}


def _block(results: list[Result], wall_s: float) -> dict[str, Any]:
    """The figures of one set of results (the whole run, or one tenant's part)."""
    ok = [r for r in results if r.ok]
    tokens = sum(r.tokens for r in ok)
    routes = Counter(r.route for r in ok)
    per_route = {}
    for route in sorted(routes):
        mine = [r for r in ok if r.route == route]
        per_route[route] = {
            "requests": routes[route],
            "latency_ms": percentiles([r.latency_s * 1000 for r in mine]),
            "ttft_ms": percentiles([r.ttft_s * 1000 for r in mine if r.ttft_s is not None]),
        }
    hits = [r.latency_s * 1000 for r in ok if r.route.startswith("cache-")]
    return {
        "requests": len(results),
        "completion_tokens": tokens,
        "tokens_per_s": tokens / wall_s if wall_s > 0 else 0.0,
        "route_shares": {k: v / len(ok) for k, v in sorted(routes.items())} if ok else {},
        "per_route": per_route,
        # Cache hits of any kind, by the latency of the attempt that was answered.
        "cache_hit_latency_ms": percentiles(hits),
        "kinds": dict(Counter(r.kind for r in results)),
        # Which kind of request a tail belongs to (long prompts, short questions, long answers).
        "ttft_by_kind_ms": {
            kind: percentiles([r.ttft_s * 1000 for r in ok if r.kind == kind and r.ttft_s is not None])
            for kind in sorted({r.kind for r in ok})
        },
        "errors": dict(Counter(r.error for r in results if not r.ok)),
        # Answers that came after the client waited and retried (429/503, as the OpenAI SDK does).
        "retries": sum(len(r.refused) for r in results),
        "refusals_retried": dict(Counter(code for r in results for code in r.refused)),
    }


def summarize(
    results: list[Result], wall_s: float, cfg: LoadConfig, rss_mb: list[float] | None = None
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "target": cfg.target,
        "scenario": cfg.scenario,
        "clients": sum(t.clients for t in cfg.groups()),
        "wall_s": wall_s,
        **_block(results, wall_s),
    }
    groups = cfg.groups()
    if len(groups) > 1:
        summary["tenants"] = {
            g.label: {"clients": g.clients, **_block([r for r in results if r.tenant == g.label], wall_s)}
            for g in groups
        }
    if rss_mb:
        first, last = rss_mb[0], rss_mb[-1]
        summary["rss_mb"] = {"start": first, "end": last, "max": max(rss_mb), "growth": last / first - 1.0}
    return summary


def _fmt(p: dict[str, float | None]) -> str:
    return "/".join("-" if p[k] is None else f"{p[k]:.0f}" for k in ("p50", "p95", "p99"))


def _rows(block: dict[str, Any], indent: str = "") -> list[str]:
    lines = [
        f"{indent}{'route':<16}{'share':>7}{'n':>6}  {'latency p50/p95/p99 ms':>26}  {'TTFT p50/p95/p99 ms':>24}",
    ]
    for route, row in block["per_route"].items():
        lines.append(
            f"{indent}{route:<16}{block['route_shares'][route]:>7.2f}{row['requests']:>6}  "
            f"{_fmt(row['latency_ms']):>26}  {_fmt(row['ttft_ms']):>24}"
        )
    hits = block["cache_hit_latency_ms"]
    errors = ", ".join(f"{k} x{v}" for k, v in sorted(block["errors"].items())) or "none"
    retried = ", ".join(f"{k} x{v}" for k, v in sorted(block["refusals_retried"].items())) or "none"
    lines.append(f"{indent}cache hits p50/p95/p99 ms {_fmt(hits)} (n={hits['n']}); errors: {errors}; "
                 f"refusals retried: {retried}")
    kinds = block.get("ttft_by_kind_ms", {})
    if len(kinds) > 1:
        lines.append(f"{indent}TTFT by kind p50/p95/p99 ms: "
                     + ", ".join(f"{k} {_fmt(p)} (n={p['n']})" for k, p in kinds.items()))
    return lines


def table(summary: dict[str, Any]) -> str:
    lines = [
        f"{summary['scenario']} against {summary['target']}: {summary['clients']} clients, "
        f"{summary['requests']} requests in {summary['wall_s']:.1f} s, "
        f"{summary['completion_tokens']} tokens, {summary['tokens_per_s']:.1f} tok/s aggregate, "
        f"errors {sum(summary['errors'].values())}",
        *_rows(summary),
    ]
    for label, block in summary.get("tenants", {}).items():
        lines.append(f"tenant {label} ({block['clients']} clients, {block['requests']} requests):")
        lines += _rows(block, "  ")
    if "short_ttft_ms" in summary:
        lines.append(f"short question behind {summary['clients'] - 1} long: TTFT p50/p95/p99 ms "
                     f"{_fmt(summary['short_ttft_ms'])} (n={summary['short_ttft_ms']['n']})")
    for label, row in summary.get("probe", {}).items():
        hits = row["hit_latency_ms"]
        other = ", ".join(f"{k} x{v}" for k, v in sorted(row["other"].items())) or "none"
        lines.append(f"probe {label} (one client, own process): cache hits p50/p95/p99 ms {_fmt(hits)} "
                     f"(n={hits['n']}); not hits: {other}")
    if "generator_gc" in summary:
        g = summary["generator_gc"]
        lines.append(f"generator GC: {g['collections']} collections, max {g['max_ms']:.1f} ms, "
                     f"total {g['total_ms']:.0f} ms")
    if "rss_mb" in summary:
        rss = summary["rss_mb"]
        lines.append(f"node RSS: {rss['start']:.0f} -> {rss['end']:.0f} MB (max {rss['max']:.0f}, "
                     f"{rss['growth'] * 100:+.1f}%)")
    return "\n".join(lines)
