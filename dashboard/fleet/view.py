"""The fleet as the page and ``/fleet/api/nodes`` show it, built from Prometheus's answers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from router.telemetry import ROUTES

from .prom import Sample

Results = Mapping[str, Sequence[Sample]]


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node: health, traffic over the window, and who it is."""

    instance: str
    node: str
    up: bool
    health: str  # "up", "degraded", "draining" or "down"
    degraded_reasons: list[str]
    requests_total: float | None  # the node's own counter, as last scraped
    requests_per_s: float | None
    routes: dict[str, float]  # requests by route since the node started
    routes_window: dict[str, float]  # requests by route over the window (Prometheus's increase())
    cache_lookups: float  # cache hits and misses since the node started
    cache_hit_rate: float | None
    cache_exact_hit_rate: float | None
    cache_semantic_hit_rate: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    fallbacks: float | None  # since the node started
    degraded: float | None  # degraded answers over the window
    currency: str
    spend: float | None
    spend_all_cloud: float | None
    spend_saved: float | None
    edge_model: str
    edge_model_version: str
    version: str
    edge_running: float | None
    edge_waiting: float | None
    edge_capacity: float | None
    pool_members: int | None
    pool_healthy: int | None
    dashboard_url: str | None


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One vLLM pool member, from its own metrics."""

    instance: str
    model: str
    up: bool
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    requests_per_s: float | None
    ttft_p95_ms: float | None


@dataclass(frozen=True, slots=True)
class FleetView:
    """Everything the fleet page shows, read at ``at`` (``error``: why there is nothing)."""

    at: float
    nodes: list[NodeRow] = field(default_factory=list)
    members: list[MemberRow] = field(default_factory=list)
    error: str | None = None

    @property
    def nodes_up(self) -> int:
        return sum(1 for n in self.nodes if n.up)

    @property
    def requests_per_s(self) -> float:
        return sum(n.requests_per_s or 0.0 for n in self.nodes)

    @property
    def routes(self) -> dict[str, int]:
        out = {r: 0.0 for r in ROUTES}
        for n in self.nodes:
            for route, count in n.routes.items():
                out[route] = out.get(route, 0.0) + count
        return {r: round(v) for r, v in out.items()}

    @property
    def cache_hit_rate(self) -> float | None:
        hits = sum((n.cache_hit_rate or 0.0) * n.cache_lookups for n in self.nodes)
        lookups = sum(n.cache_lookups for n in self.nodes)
        return hits / lookups if lookups else None

    @property
    def fallbacks(self) -> float:
        return sum(n.fallbacks or 0.0 for n in self.nodes)

    @property
    def currency(self) -> str:
        found = {n.currency for n in self.nodes if n.currency}
        return found.pop() if len(found) == 1 else ("mixed" if found else "USD")

    @property
    def spend(self) -> float:
        return sum(n.spend or 0.0 for n in self.nodes)

    @property
    def spend_saved(self) -> float:
        return sum(n.spend_saved or 0.0 for n in self.nodes)


def _by_instance(samples: Sequence[Sample]) -> dict[str, float | None]:
    return {s.labels.get("instance", ""): s.value for s in samples}


def _per_label(samples: Sequence[Sample], label: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for s in samples:
        if s.value is not None:
            out.setdefault(s.labels.get("instance", ""), {})[s.labels.get(label, "")] = round(s.value, 2)
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _rate(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _plain_path(path: str) -> bool:
    """An absolute path and nothing else: one leading "/", printable ASCII without spaces, no
    "//" (a host to a browser), no "@" (a user before another host once glued to ours), no
    backslash (a "/" to browsers); a scheme cannot come first when "/" does."""
    return (
        path.startswith("/")
        and "//" not in path
        and "@" not in path
        and "\\" not in path
        and all("!" <= ch <= "~" for ch in path)
    )


def dashboard_url(scrape_url: str | None, path: str) -> str | None:
    """The node's own dashboard: where Prometheus scrapes it, with the dashboard's path.

    The path is a label the target itself exposes: it becomes a link only when it is a plain
    absolute path, so the link always stays on the scraped scheme and host (a target saying
    ``@evil.example/`` gets none).
    """
    if not scrape_url or not path or not _plain_path(path):
        return None
    parts = urlsplit(scrape_url)
    host = parts.netloc.rpartition("@")[2]  # host[:port]: credentials in a scrape URL stay off the page
    if parts.scheme not in ("http", "https") or not host:
        return None
    url = f"{parts.scheme}://{host}{path}"
    # The check above already keeps the host; this holds it whatever a parser makes of the rest.
    built = urlsplit(url)
    return url if (built.scheme, built.netloc) == (parts.scheme, host) else None


def build_nodes(results: Results, scrape_urls: Mapping[str, str]) -> list[NodeRow]:
    """One row per node Prometheus scrapes (``up``), sorted by node name then instance."""
    # One value per instance, by figure; a figure Prometheus returned nothing for reads as empty.
    one: defaultdict[str, dict[str, float | None]] = defaultdict(dict)
    one.update((name, _by_instance(samples)) for name, samples in results.items())
    info = {s.labels.get("instance", ""): s.labels for s in results.get("info", ())}
    routes = _per_label(results.get("routes", ()), "route")
    routes_window = _per_label(results.get("routes_window", ()), "route")
    hits = _per_label(results.get("hits", ()), "kind")
    spend = {
        s.labels.get("instance", ""): (s.labels.get("currency", ""), s.value)
        for s in results.get("spend", ())
    }

    rows = []
    for instance, up_value in one["up"].items():
        up = up_value == 1.0
        labels = info.get(instance, {})
        exact = hits.get(instance, {}).get("exact", 0.0)
        semantic = hits.get(instance, {}).get("semantic", 0.0)
        lookups = exact + semantic + (one["misses"].get(instance) or 0.0)
        currency, spent = spend.get(instance, ("", None))
        cloud = one["spend_all_cloud"].get(instance)
        pool_members, pool_healthy = one["pool_members"].get(instance), one["pool_healthy"].get(instance)
        running, waiting, capacity = (
            one[k].get(instance) for k in ("edge_running", "edge_waiting", "edge_capacity")
        )
        draining = one["draining"].get(instance) == 1.0
        reasons = []
        if (one["degraded"].get(instance) or 0.0) > 0:
            reasons.append("degraded answers in the window")
        if pool_members and not pool_healthy:
            reasons.append("no healthy cloud member")
        if running is not None and capacity and running >= capacity and (waiting or 0) > 0:
            reasons.append("edge saturated")
        health = "down" if not up else "draining" if draining else "degraded" if reasons else "up"
        rows.append(
            NodeRow(
                instance=instance,
                node=labels.get("node", "") or instance,
                up=up,
                health=health,
                degraded_reasons=reasons if up else [],
                requests_total=one["requests_total"].get(instance),
                requests_per_s=one["requests_per_s"].get(instance),
                routes=routes.get(instance, {}),
                routes_window=routes_window.get(instance, {}),
                cache_lookups=round(lookups, 2),
                cache_hit_rate=_rate(exact + semantic, lookups),
                cache_exact_hit_rate=_rate(exact, lookups),
                cache_semantic_hit_rate=_rate(semantic, lookups),
                latency_p50_ms=_ms(one["latency_p50"].get(instance)),
                latency_p95_ms=_ms(one["latency_p95"].get(instance)),
                ttft_p50_ms=_ms(one["ttft_p50"].get(instance)),
                ttft_p95_ms=_ms(one["ttft_p95"].get(instance)),
                fallbacks=one["fallbacks"].get(instance),
                degraded=one["degraded"].get(instance),
                currency=currency,
                spend=spent,
                spend_all_cloud=cloud,
                spend_saved=None if spent is None or cloud is None else cloud - spent,
                edge_model=labels.get("edge_model", ""),
                edge_model_version=labels.get("edge_model_version", ""),
                version=labels.get("version", ""),
                edge_running=running,
                edge_waiting=waiting,
                edge_capacity=capacity,
                pool_members=None if pool_members is None else int(pool_members),
                pool_healthy=None if pool_healthy is None else int(pool_healthy),
                dashboard_url=dashboard_url(scrape_urls.get(instance), labels.get("dashboard_path", "")),
            )
        )
    rows.sort(key=lambda r: (r.node, r.instance))
    return rows


def build_members(results: Results) -> list[MemberRow]:
    """One row per member target (``up``), with each model it serves."""
    up = _by_instance(results.get("up", ()))
    rps, ttft = _by_instance(results.get("requests_per_s", ())), _by_instance(results.get("ttft_p95", ()))
    per_model: dict[tuple[str, str], dict[str, float | None]] = {}
    for name in ("running", "waiting", "kv_cache"):
        for s in results.get(name, ()):
            key = (s.labels.get("instance", ""), s.labels.get("model_name", ""))
            per_model.setdefault(key, {})[name] = s.value
    rows = []
    for instance, value in up.items():
        models = sorted(m for (i, m) in per_model if i == instance) or [""]
        for model in models:
            figures = per_model.get((instance, model), {})
            rows.append(
                MemberRow(
                    instance=instance,
                    model=model,
                    up=value == 1.0,
                    running=figures.get("running"),
                    waiting=figures.get("waiting"),
                    kv_cache_usage=figures.get("kv_cache"),
                    requests_per_s=rps.get(instance),
                    ttft_p95_ms=_ms(ttft.get(instance)),
                )
            )
    rows.sort(key=lambda r: (r.instance, r.model))
    return rows
