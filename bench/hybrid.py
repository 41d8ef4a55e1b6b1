"""The hybrid against its parts: one seeded mixed workload, side by side, on the same cores.

    python -m bench.hybrid [--workload mix|short|long] [--configs a,b,c] [--pinned] [--seconds 60]
                           [--clients 8] [--slo 1.0] [--seed 0] [--json PATH]

Configurations (each one's servers are started fresh and stopped, whole process groups, before
the next):

- ``a``: the cloud member alone: vLLM served by ``edgeroute cloud serve`` (``--member-dtype``,
  default ``auto``; every core), the clients calling it directly with its API key;
- ``b``: the edge alone: a node with no member (``--no-local-member``), edge threads = cores, cache off;
- ``c``: the node as ``make run`` starts it: its shipped defaults, local member included, cache on
  (the run starts once the local member has joined the pool);
- ``d`` (``--pinned``): the node pinned to the first core (``taskset``; edge 1 thread) and the member
  to the second (``--threads 1``), configured as a pool member (not the local one); cache on.

The workload is ``bench load``'s ``mix`` (``loadtest.loadgen``) with its default shares, or only
its short kinds (``short``: short questions and paraphrased repeats) or its long ones (``long``:
long prompts and long answers), greedy, closed-loop clients for ``--seconds``; requests in flight
then finish (up to ``--drain`` s). Goodput is the requests answered whose first token came within
``--slo`` seconds, per second of the run. One warm-up request per side goes first, uncounted.
Reported per configuration: goodput, requests, tokens/s, TTFT p50/p95 (overall, by request kind,
by side), route shares (``x-edgeroute-route``; the member alone has none: its side is cloud),
cloud tokens, and for the nodes their goodput over the better single engine's (a, b); with the
CPU's model and ISA. Loopback only; no simulated WAN (the netem round trip is not built).
Measure on an otherwise idle box: oversubscribed cores slow llama.cpp badly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from bench.hostile import edge_node, node_command
from bench.memory import rss_tree
from cloud.member.launcher import cpu_flags
from cloud.member.launcher import describe_cpu as launcher_cpu
from cloud.member.process import free_port
from loadtest.loadgen import LoadConfig, Result, run_load
from loadtest.loadreport import percentiles, summarize
from models import EDGE_DEFAULT

CONFIGS = {
    "a": "cloud member alone (vLLM)",
    "b": "edge alone (no member, cache off)",
    "c": "node, shipped defaults (local member, cache on)",
    "d": "node pinned: edge core 0, member core 1",
}
WORKLOADS = {"mix": None, "short": ("short", "repeat"), "long": ("long_prompt", "long_answer")}
ISA = ("avx2", "avx512f", "avx512_bf16", "amx")


def workload_shares(name: str, shares: dict[str, float] | None = None) -> dict[str, float]:
    """The mix's shares (``LoadConfig``'s default) restricted to the kinds of workload ``name``."""
    shares = dict(LoadConfig().shares if shares is None else shares)
    kinds = WORKLOADS[name]
    return shares if kinds is None else {k: v for k, v in shares.items() if k in kinds}


def good_requests(results: list[Result], slo_s: float) -> int:
    """Requests answered in full whose first token came within ``slo_s``."""
    return sum(1 for r in results if r.ok and r.ttft_s is not None and r.ttft_s <= slo_s)


def side_of(route: str, direct: str = "cloud") -> str:
    """edge, cloud, cache or error; ``foreign`` (a server that names no route) is ``direct``."""
    if route.startswith("cache-"):
        return "cache"
    return direct if route == "foreign" else route


def describe_cpu(cpuinfo: str) -> dict[str, Any]:
    """The first CPU's model and the ISA flags that decide the engines' kernels."""
    flags = cpu_flags(cpuinfo)
    model = next((ln.partition(":")[2].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "")
    isa = {f: (any(x.startswith("amx") for x in flags) if f == "amx" else f in flags) for f in ISA}
    return {"model": model, "isa": isa, "text": launcher_cpu(cpuinfo, flags)}


def _ttft(results: list[Result]) -> dict[str, Any]:
    p = percentiles([r.ttft_s for r in results if r.ttft_s is not None])
    return {"p50": p["p50"], "p95": p["p95"], "n": p["n"]}


def config_report(
    results: list[Result], wall_s: float, slo_s: float, cfg: LoadConfig, direct: str = "cloud"
) -> dict[str, Any]:
    """The figures of one configuration's run (``direct``: the side of a server that names no route)."""
    s = summarize(results, wall_s, cfg)
    ok = [r for r in results if r.ok]
    good = good_requests(results, slo_s)
    sides = sorted({side_of(r.route, direct) for r in ok})
    return {
        "goodput": good / wall_s if wall_s > 0 else 0.0, "good": good, "requests": len(results), "ok": len(ok),
        "errors": s["errors"], "wall_s": wall_s, "completion_tokens": s["completion_tokens"],
        "tokens_per_s": s["tokens_per_s"], "ttft_s": _ttft(ok),
        "ttft_by_kind_s": {k: _ttft([r for r in ok if r.kind == k]) for k in sorted({r.kind for r in ok})},
        "by_side": {
            side: {"share": len(mine) / len(ok), "good": good_requests(mine, slo_s), "ttft_s": _ttft(mine)}
            for side in sides for mine in [[r for r in ok if side_of(r.route, direct) == side]]
        },
        "route_shares": s["route_shares"],
        "cloud_tokens": sum(r.tokens for r in results if side_of(r.route, direct) == "cloud"),
    }


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited ({proc.returncode})")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout_s:g} s")
        time.sleep(0.5)


def _get(url: str, check: Callable[[httpx.Response], bool] = lambda r: r.status_code == 200) -> bool:
    try:
        return check(httpx.get(url, timeout=2))
    except (httpx.HTTPError, ValueError):
        return False


def _member_joined(response: httpx.Response) -> bool:
    cloud = response.json().get("cloud") if response.status_code == 200 else None
    return cloud is not None and cloud["members"] > 0 and cloud["healthy"] == cloud["members"]


@contextmanager
def vllm_member(
    log: Path, key: str, prefix: list[str], threads: int | None, dtype: str, timeout_s: float
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``edgeroute cloud serve`` (``python -m cloud.member``) on a free port, its key in its environment."""
    port = free_port()
    argv = [*prefix, sys.executable, "-m", "cloud.member", "--port", str(port), "--dtype", dtype]
    argv += ["--threads", str(threads)] if threads else []
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "EDGEROUTE_MEMBER_API_KEY": key}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until(lambda: _get(url + "/health"), proc, timeout_s, "the vLLM member")
        yield url, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the supervisor stops vLLM's own group
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _tracked(stack: ExitStack, cm: Any) -> tuple[str, subprocess.Popen[bytes]]:
    """Enter ``cm`` (a server) so that whatever it started and left behind is killed after it stops."""
    left: list[int] = []
    stack.callback(_reap, left)
    url, proc = stack.enter_context(cm)
    stack.callback(lambda: left.extend(int(row["pid"]) for row in rss_tree(proc.pid)[1:]))  # type: ignore[call-overload]
    return url, proc


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
    python = node_command()
    started = time.monotonic()
    with ExitStack() as stack:
        if name == "a":
            url, _ = _tracked(stack, vllm_member(work / "a-member.log", key, [], None, args.member_dtype,
                                                 args.startup_timeout))
            cfg.target, cfg.model, cfg.api_key = url, EDGE_DEFAULT, key
            _warm(url, [EDGE_DEFAULT], key, node=False)
        elif name == "b":
            env = {"EDGEROUTE_EDGE__N_THREADS": str(len(cpus))}
            cfg.target, _ = _tracked(stack, edge_node(python, work / "b", work / "b-node.log", env))
            cfg.cache = False
            _warm(cfg.target, ["edge"], None, node=True)
        elif name == "c":
            env = {"EDGEROUTE_CACHE__ENABLED": "true"}  # the shipped default (edge_node turns it off)
            cfg.target, proc = _tracked(stack, edge_node(python, work / "c", work / "c-node.log", env, local_member=True))
            _wait_until(lambda: _get(cfg.target + "/healthz", _member_joined), proc, args.startup_timeout,
                        "the node's local member")
            _warm(cfg.target, ["edge", "cloud"], None, node=True)
        else:
            member, _ = _tracked(stack, vllm_member(work / "d-member.log", key, ["taskset", "-c", str(cpus[1])], 1,
                                                    args.member_dtype, args.startup_timeout))
            entry = {"name": "pinned", "base_url": member + "/v1", "model": EDGE_DEFAULT, "api_key": key}
            env = {"EDGEROUTE_CACHE__ENABLED": "true", "EDGEROUTE_EDGE__N_THREADS": "1",
                   "EDGEROUTE_CLOUD__MEMBERS": json.dumps([entry])}
            cfg.target, proc = _tracked(stack, edge_node(["taskset", "-c", str(cpus[0]), *python], work / "d",
                                                         work / "d-node.log", env))
            _wait_until(lambda: _get(cfg.target + "/healthz", _member_joined), proc, 60, "the pinned member")
            _warm(cfg.target, ["edge", "cloud"], None, node=True)
        ready_s = time.monotonic() - started
        results, wall, cut = asyncio.run(_load(cfg, args.seconds + args.drain))
        loaded = time.monotonic()
    report = config_report(results, wall, args.slo, cfg)
    return {"config": name, "what": CONFIGS[name], "startup_s": round(ready_s, 1), "cut": cut,
            "stop_s": round(time.monotonic() - loaded, 1), **report}


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(report: dict[str, Any]) -> str:
    lines = [f"CPU: {report['cpu']['text']}; {report['cores']} cores; workload {report['workload']} "
             f"{report['shares']}, {report['clients']} clients, {report['seconds']:g} s, TTFT objective "
             f"{report['slo_s']:g} s, seed {report['seed']}; {report['date']}",
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
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=list(WORKLOADS), default="mix")
    ap.add_argument("--configs", default="a,b,c", help="a subset of a,b,c,d (see above)")
    ap.add_argument("--pinned", action="store_true", help="also run d (edge and member pinned to a core each)")
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
    chosen = {c.strip() for c in args.configs.split(",") if c.strip()} | ({"d"} if args.pinned else set())
    if not chosen <= set(CONFIGS):
        ap.error(f"--configs: a subset of {','.join(CONFIGS)}")
    names = [c for c in CONFIGS if c in chosen]
    cpus = sorted(os.sched_getaffinity(0))
    if "d" in names and len(cpus) < 2:
        ap.error("d (--pinned) needs two cores")
    args.pairs = args.pairs if args.pairs.exists() else None
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": describe_cpu(cpuinfo),
        "cores": len(cpus), "workload": args.workload, "shares": workload_shares(args.workload),
        "clients": args.clients, "seconds": args.seconds, "slo_s": args.slo, "seed": args.seed,
        "member_dtype": args.member_dtype, "configs": [],
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
    singles = [r["goodput"] for r in report["configs"] if r["config"] in "ab" and "error" not in r]
    for r in report["configs"]:
        if r["config"] in "cd" and "error" not in r:
            r["vs_best_single"] = r["goodput"] / max(singles) if singles and max(singles) > 0 else None
    print(table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
