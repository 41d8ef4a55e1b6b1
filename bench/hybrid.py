"""The hybrid against its parts: one seeded mixed workload, side by side, on the same cores
(docs/routing.md describes the method and the report).

    python -m bench.hybrid [--workload mix|short|long] [--configs a,b,c] [--pinned] [--rtt-ms 0]
                           [--seconds 60] [--clients 8] [--slo 1.0] [--seed 0] [--json PATH]

Each configuration's servers are started fresh and stopped, whole process groups, before the
next: a) the cloud member alone (``edgeroute cloud serve``, every core, called directly with its
key); b) the edge alone (no member, cache off); c) the node as ``make run`` starts it; with
``--pinned``, d) the node on the first core (``taskset``) with the member on the second, a
configured member ``--rtt-ms`` away (:mod:`bench.wan`), and d's parts alone: e) the member, f) the
edge. The workload is ``bench load``'s ``mix`` (or its short or long kinds), greedy, closed-loop
clients; goodput counts the answers whose first token came within ``--slo`` s, per second.
Measure on an otherwise idle box: oversubscribed cores slow llama.cpp badly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from bench.dashboard_sse import cpu_seconds
from bench.harness import describe_cpu, write_json
from bench.hostile import NODE_ENV
from bench.memory import member_joined, rss_tree
from loadtest.loadgen import LoadConfig, Result, run_load
from loadtest.loadreport import percentiles, summarize
from bench.wan import delayed_proxy
from loadtest.servers import EDGEROUTE, NodeProcess, free_port, node_process
from models import EDGE_DEFAULT
from router.telemetry import read_decisions
from router.telemetry.aggregate import prediction_error

CONFIGS = {
    "a": "cloud member alone (vLLM)",
    "b": "edge alone (no member, cache off)",
    "c": "node, shipped defaults (local member, cache on)",
    "d": "node pinned: edge core 0, member core 1",
    "e": "cloud member alone on core 1 (d's cloud part)",
    "f": "edge alone on core 0 (d's edge part, cache off)",
}
WORKLOADS = {"mix": None, "short": ("short", "repeat"), "long": ("long_prompt", "long_answer")}


def workload_shares(name: str) -> dict[str, float]:
    """The mix's shares (``LoadConfig``'s default) restricted to the kinds of workload ``name``."""
    shares, kinds = dict(LoadConfig().shares), WORKLOADS[name]
    return shares if kinds is None else {k: v for k, v in shares.items() if k in kinds}


def good_requests(results: list[Result], slo_s: float) -> int:
    """Requests answered in full whose first token came within ``slo_s``."""
    return sum(1 for r in results if r.ok and r.ttft_s is not None and r.ttft_s <= slo_s)


def side_of(route: str) -> str:
    """edge, cloud, cache or error; ``foreign`` (a server that names no route: the member alone) is cloud."""
    if route.startswith("cache-"):
        return "cache"
    return "cloud" if route == "foreign" else route


def _ttft(results: list[Result]) -> dict[str, Any]:
    p = percentiles([r.ttft_s for r in results if r.ttft_s is not None])
    return {"p50": p["p50"], "p95": p["p95"], "n": p["n"]}


def config_report(results: list[Result], wall_s: float, slo_s: float, cfg: LoadConfig) -> dict[str, Any]:
    """The figures of one configuration's run (a server that names no route is the cloud side)."""
    s = summarize(results, wall_s, cfg)
    ok = [r for r in results if r.ok]
    good = good_requests(results, slo_s)
    sides = sorted({side_of(r.route) for r in ok})
    return {
        "goodput": good / wall_s if wall_s > 0 else 0.0, "good": good, "requests": len(results), "ok": len(ok),
        "errors": s["errors"], "wall_s": wall_s, "completion_tokens": s["completion_tokens"],
        "tokens_per_s": s["tokens_per_s"], "ttft_s": _ttft(ok),
        "ttft_by_kind_s": {k: _ttft([r for r in ok if r.kind == k]) for k in sorted({r.kind for r in ok})},
        "by_side": {
            side: {"share": len(mine) / len(ok), "good": good_requests(mine, slo_s), "ttft_s": _ttft(mine)}
            for side in sides for mine in [[r for r in ok if side_of(r.route) == side]]
        },
        "route_shares": s["route_shares"],
        "cloud_tokens": sum(r.tokens for r in results if side_of(r.route) == "cloud"),
    }


def vllm_member(log: Path, key: str, prefix: list[str], threads: int | None, dtype: str, timeout_s: float) -> Any:
    """``edgeroute cloud serve`` (``python -m cloud.member``) on a free port, its key in its environment;
    SIGTERM on the way out: the supervisor stops vLLM's own group."""
    port = free_port()
    argv = [*prefix, sys.executable, "-m", "cloud.member", "--port", str(port), "--dtype", dtype]
    argv += ["--threads", str(threads)] if threads else []
    return NodeProcess(argv, f"http://127.0.0.1:{port}", ready_path="/health", log_path=log, timeout=timeout_s,
                       env={"HF_HUB_OFFLINE": "1", "EDGEROUTE_MEMBER_API_KEY": key}, what="the vLLM member").running()


def edge_node(work: Path, name: str, env: dict[str, str], *, local_member: bool = False,
              command: list[str] = EDGEROUTE) -> Any:
    """A node (bench.hostile's: cache off unless ``env`` turns it on), its data and log in ``work``."""
    return node_process("--local-member" if local_member else "--no-local-member", "--log-level", "warning",
                        "--data-dir", str(work / name), log_path=work / f"{name}-node.log", env={**NODE_ENV, **env},
                        command=command)


def _tracked(stack: ExitStack, cm: Any) -> NodeProcess:
    """Enter ``cm`` (a server) so that whatever it started and left behind is killed after it stops."""
    left: list[int] = []
    stack.callback(_reap, left)
    server = stack.enter_context(cm)
    stack.callback(lambda: left.extend(int(row["pid"]) for row in rss_tree(server.pid)[1:]))  # type: ignore[call-overload]
    return server


def _reap(pids: list[int]) -> None:
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in pids:
        try:
            group = os.getpgid(pid)
            if group != os.getpgid(0):
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _warm(url: str, models: list[str], key: str | None, node: bool) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for model in models:
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say OK."}],
                                "max_tokens": 4, "temperature": 0}
        body |= {"cache": False} if node else {}
        httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=300).raise_for_status()


async def _load(cfg: LoadConfig, bound_s: float) -> tuple[list[Result], float, bool]:
    """Run the load, cut at ``bound_s``: the results, the wall time, whether it was cut."""
    sink: list[Result] = []
    started = time.perf_counter()
    try:
        summary = await asyncio.wait_for(run_load(cfg, sink), bound_s)
        return sink, summary["wall_s"], False
    except TimeoutError:
        return sink, time.perf_counter() - started, True


def run_config(name: str, args: argparse.Namespace, work: Path, cpus: list[int]) -> dict[str, Any]:
    """Start configuration ``name``'s servers, warm them, run the load, stop them."""
    key = secrets.token_urlsafe(16)
    cfg = LoadConfig(scenario="mix", clients=args.clients, requests=10**9, duration_s=args.seconds,
                     shares=workload_shares(args.workload), pairs=args.pairs, seed=args.seed)
    started = time.monotonic()
    extra: dict[str, Any] = {}
    node: NodeProcess | None = None
    with ExitStack() as stack:
        if name in ("a", "e"):
            prefix, threads = (["taskset", "-c", str(cpus[1])], 1) if name == "e" else ([], None)
            url = _tracked(stack, vllm_member(work / f"{name}-member.log", key, prefix, threads, args.member_dtype,
                                              args.startup_timeout)).base
            _warm(url, [EDGE_DEFAULT], key, node=False)
            # e's clients reach a cloud-only service across the WAN
            cfg.target = _behind(stack, url, args.rtt_ms if name == "e" else 0)
            cfg.model, cfg.api_key = EDGE_DEFAULT, key
        elif name in ("b", "f"):
            threads = len(cpus) if name == "b" else 1
            command = ["taskset", "-c", str(cpus[0]), *EDGEROUTE] if name == "f" else EDGEROUTE
            cfg.target = _tracked(stack, edge_node(work, name, {"EDGEROUTE_EDGE__N_THREADS": str(threads)},
                                                   command=command)).base
            cfg.cache = False
            _warm(cfg.target, ["edge"], None, node=True)
        elif name == "c":
            env = {"EDGEROUTE_CACHE__ENABLED": "true"}  # the shipped default (edge_node turns it off)
            node = _tracked(stack, edge_node(work, "c", env, local_member=True))
        else:
            member = _tracked(stack, vllm_member(work / "d-member.log", key, ["taskset", "-c", str(cpus[1])], 1,
                                                 args.member_dtype, args.startup_timeout)).base
            entry = {"name": "pinned", "base_url": _behind(stack, member, args.rtt_ms) + "/v1", "model": EDGE_DEFAULT,
                     "api_key": key}
            env = {"EDGEROUTE_CACHE__ENABLED": "true", "EDGEROUTE_EDGE__N_THREADS": "1",
                   "EDGEROUTE_CLOUD__MEMBERS": json.dumps([entry])}
            node = _tracked(stack, edge_node(work, "d", env, command=["taskset", "-c", str(cpus[0]), *EDGEROUTE]))
        if node is not None:  # c's local member starts with the node, d's is up already
            cfg.target = node.base
            member_joined(node, args.startup_timeout if name == "c" else 60)
            _warm(cfg.target, ["edge", "cloud"], None, node=True)
            if name == "c":
                extra["idle_cpu_pct"] = idle_cpu_pct(node.pid, args.idle_s)
        ready_s = time.monotonic() - started
        node_cpu = cpu_seconds(node.pid) if node is not None else 0.0
        results, wall, cut = asyncio.run(_load(cfg, args.seconds + args.drain))
        loaded = time.monotonic()
        if node is not None:  # the node's own process (the edge, the cache's models, HTTP), not its member
            extra["node_cpu_pct"] = 100.0 * (cpu_seconds(node.pid) - node_cpu) / wall
    report = config_report(results, wall, args.slo, cfg)
    if node is not None:  # stopped: its decision log is complete
        extra.update(decision_summary(work / name / "telemetry.db"))
    return {"config": name, "what": CONFIGS[name], "startup_s": round(ready_s, 1), "cut": cut,
            "stop_s": round(time.monotonic() - loaded, 1), **report, **extra}


def _behind(stack: ExitStack, url: str, rtt_ms: float) -> str:
    """``url`` across ``rtt_ms`` of round trip (:mod:`bench.wan`; 0: ``url`` itself)."""
    if rtt_ms <= 0:
        return url
    return f"http://127.0.0.1:{stack.enter_context(delayed_proxy('127.0.0.1', int(url.rsplit(':', 1)[1]), rtt_ms))}"


def idle_cpu_pct(pid: int, seconds: float) -> float:
    """The CPU the process tree of ``pid`` used while idle, in % of one core."""
    def used() -> float:
        return sum(cpu_seconds(int(row["pid"])) for row in rss_tree(pid))  # type: ignore[call-overload]

    before, began = used(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (used() - before) / (time.monotonic() - began)


def decision_summary(db: Path) -> dict[str, Any]:
    """From the node's decision log: |predicted - observed| / observed first-token time of the run's
    streamed engine answers, and how many decisions each routing reason made."""
    events = read_decisions(db) if db.exists() else []
    p = percentiles(sorted(e for ev in events if (e := prediction_error(ev)) is not None))
    return {"ttft_prediction_error": {"p50": p["p50"], "p95": p["p95"], "n": p["n"]},
            "reasons": dict(Counter(ev.reason for ev in events).most_common())}


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def table(report: dict[str, Any]) -> str:
    lines = [f"CPU: {report['cpu']['text']}; {report['cores']} cores; workload {report['workload']} "
             f"{report['shares']}, {report['clients']} clients, {report['seconds']:g} s, TTFT objective "
             f"{report['slo_s']:g} s, seed {report['seed']}"
             + (f", {report['rtt_ms']:g} ms round trip to the member in d and e" if report.get("rtt_ms") else "")
             + f"; {report['date']}",
             f"{'config':<50}{'good/s':>8}{'req':>6}{'tok/s':>7}{'TTFT p50/p95 s':>16}"
             f"{'edge/cloud/cache':>18}{'cloud tok':>10}{'x best':>7}"]
    for r in report["configs"]:
        label = f"{r['config']}) {r['what']}"
        if "error" in r:
            lines.append(f"{label:<50} failed: {r['error']}")
            continue
        shares = "/".join(f"{r['by_side'].get(s, {}).get('share', 0):.2f}" for s in ("edge", "cloud", "cache"))
        ratio = "-" if r.get("vs_best_single") is None else f"{r['vs_best_single']:.2f}"
        lines.append(f"{label:<50}{r['goodput']:>8.3f}{r['requests']:>6}{r['tokens_per_s']:>7.1f}"
                     f"{_s(r['ttft_s']['p50']) + '/' + _s(r['ttft_s']['p95']):>16}{shares:>18}"
                     f"{r['cloud_tokens']:>10}{ratio:>7}")
        kinds = ", ".join(f"{k} {_s(p['p50'])}/{_s(p['p95'])} (n={p['n']})" for k, p in r["ttft_by_kind_s"].items())
        sides = ", ".join(f"{k} {_s(v['ttft_s']['p50'])}/{_s(v['ttft_s']['p95'])} (n={v['ttft_s']['n']}, good {v['good']})"
                          for k, v in r["by_side"].items())
        errors = ", ".join(f"{k} x{v}" for k, v in r["errors"].items()) or "none"
        lines.append(f"    TTFT p50/p95 s by kind: {kinds}")
        lines.append(f"    by side: {sides}; errors: {errors}; ready in {r['startup_s']} s"
                     + ("; cut at the time bound" if r["cut"] else ""))
        notes = []
        if (pe := r.get("ttft_prediction_error")) is not None:
            notes.append(f"first-token prediction error p50/p95 {_pct(pe['p50'])}/{_pct(pe['p95'])} (n={pe['n']})")
        if r.get("vs_parts_sum") is not None:
            notes.append(f"{r['vs_parts_sum']:.2f}x the sum of e and f")
        if r.get("reasons"):
            notes.append("reasons " + ", ".join(f"{k} {v}" for k, v in r["reasons"].items()))
        if r.get("node_cpu_pct") is not None:
            notes.append(f"node process CPU under load {r['node_cpu_pct']:.0f}% of a core")
        if r.get("idle_cpu_pct") is not None:
            notes.append(f"idle CPU {r['idle_cpu_pct']:.1f}% of a core")
        if notes:
            lines.append("    " + "; ".join(notes))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=list(WORKLOADS), default="mix")
    ap.add_argument("--configs", default="a,b,c", help="a subset of a,b,c,d (see above)")
    ap.add_argument("--pinned", action="store_true",
                    help="also run d (edge and member pinned to a core each) and its parts alone (e, f)")
    ap.add_argument("--rtt-ms", type=float, default=0.0, help="round trip between node and member in d (and to e)")
    ap.add_argument("--idle-s", type=float, default=15.0, help="how long c's idle CPU is sampled after warm-up")
    ap.add_argument("--seconds", type=float, default=60.0, help="load per configuration")
    ap.add_argument("--drain", type=float, default=120.0, help="at most this long for requests in flight after")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--slo", type=float, default=1.0, help="TTFT objective, s")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--member-dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    ap.add_argument("--startup-timeout", type=float, default=600.0, help="per server, s")
    ap.add_argument("--pairs", type=Path, default=Path.cwd().parent / "shared" / "data" / "qqp_pairs.jsonl")
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on the way out, as ^C does
    chosen = {c.strip() for c in args.configs.split(",") if c.strip()} | ({"d", "e", "f"} if args.pinned else set())
    if not chosen <= set(CONFIGS):
        ap.error(f"--configs: a subset of {','.join(CONFIGS)}")
    names = [c for c in CONFIGS if c in chosen]
    cpus = sorted(os.sched_getaffinity(0))
    if {"d", "e", "f"} & set(names) and len(cpus) < 2:
        ap.error("d, e and f (--pinned) need two cores")
    args.pairs = args.pairs if args.pairs.exists() else None
    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": describe_cpu(),
        "cores": len(cpus), "workload": args.workload, "shares": workload_shares(args.workload),
        "clients": args.clients, "seconds": args.seconds, "slo_s": args.slo, "seed": args.seed,
        "member_dtype": args.member_dtype, "rtt_ms": args.rtt_ms, "configs": [],
    }
    bound = len(names) * (args.startup_timeout + args.seconds + args.drain + 60)
    print(f"{report['cpu']['text']}: configurations {','.join(names)}, at most {bound / 60:.0f} min", flush=True)
    with tempfile.TemporaryDirectory(prefix="edgeroute-hybrid-") as tmp:
        for name in names:
            print(f"{name}) {CONFIGS[name]} ...", flush=True)
            try:
                row = run_config(name, args, Path(tmp), cpus)
            except (RuntimeError, TimeoutError, OSError, httpx.HTTPError) as exc:
                logs = sorted(Path(tmp).glob(f"{name}-*.log"))
                tail = " | ".join(p.read_text(errors="replace")[-300:].replace("\n", " ") for p in logs)
                row = {"config": name, "what": CONFIGS[name], "error": f"{type(exc).__name__}: {exc}", "log_tail": tail}
            report["configs"].append(row)
            print(f"   {row.get('goodput', 0):.3f} good req/s" if "error" not in row else f"   {row['error']}", flush=True)
    good = {r["config"]: r["goodput"] for r in report["configs"] if "error" not in r}
    singles = [good[c] for c in "ab" if c in good]
    for r in report["configs"]:
        if r["config"] in "cd" and "error" not in r:
            r["vs_best_single"] = r["goodput"] / max(singles) if singles and max(singles) > 0 else None
        if r["config"] == "d" and "error" not in r and good.get("e", 0) + good.get("f", 0) > 0 and {"e", "f"} <= set(good):
            r["vs_parts_sum"] = r["goodput"] / (good["e"] + good["f"])
    print(table(report))
    if args.json:
        write_json(args.json, report, indent=1)


if __name__ == "__main__":
    main()
