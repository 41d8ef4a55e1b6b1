"""Memory of a default node: ``edgeroute serve`` with its defaults (edge model, embedder, cache, the
local cloud member, 8 slots), one edge and one cloud request, then the RSS of the node and of
every process under it.

    python -m bench.memory [--port 18090] [--max-tokens 64] [--json out.json] [-- extra serve args]

RSS is VmRSS from ``/proc`` (anonymous + file-backed pages: a memory-mapped weights file counts
once it has been read). Environment variables (``EDGEROUTE_*``) reach the node as usual.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import httpx

from bench.harness import write_json
from loadtest.servers import NodeProcess, node_process, wait_ready


def rss_tree(pid: int, depth: int = 0) -> list[dict[str, object]]:
    """The process ``pid`` and its descendants, each with its command line and its VmRSS, RssAnon
    and RssFile in MiB."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        rss = {k: int(status[k].split()[0]) // 1024 for k in ("VmRSS", "RssAnon", "RssFile") if k in status}
        rows: list[dict[str, object]] = [{"pid": pid, "depth": depth, "cmd": cmd[:100], **rss}]
        children = Path(f"/proc/{pid}/task").glob("*/children")  # one file per thread
        kids = [int(kid) for path in children for kid in path.read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    for kid in kids:
        rows += rss_tree(kid, depth + 1)
    return rows


def member_joined(node: NodeProcess, timeout: float) -> None:
    """Return once ``node``'s cloud members (if it has any) are all healthy: a node answers from its
    edge while its members start."""

    def joined(health: httpx.Response) -> bool:
        cloud = health.json().get("cloud") if health.status_code == 200 else None
        return health.status_code == 200 and (cloud is None or cloud["healthy"] == cloud["members"] > 0)

    wait_ready(node.base + "/healthz", node.alive, timeout, "the node's cloud member", joined)


def _ask(port: int, model: str, max_tokens: int) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    resp = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=600)
    resp.raise_for_status()
    return resp.headers.get("x-edgeroute-route", "?")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--startup-timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("serve_args", nargs="*", help="extra `edgeroute serve` arguments (after --)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="edgeroute-mem-") as data_dir, node_process(
        "--data-dir", data_dir, "--log-level", "warning", *args.serve_args, port=args.port,
        timeout=args.startup_timeout,
    ) as node:
        member_joined(node, args.startup_timeout)
        started = rss_tree(node.proc.pid)
        routes = [_ask(args.port, "edge", args.max_tokens), _ask(args.port, "cloud", args.max_tokens)]
        after = rss_tree(node.proc.pid)

    print(f"routes answered: {', '.join(routes)}")
    print(f"{'pid':>8} {'RSS MiB':>8} {'anon':>6} {'file':>6}  (at start -> after the requests)  command")
    before = {r["pid"]: r for r in started}
    for row in after:
        was = before.get(row["pid"], {}).get("VmRSS", "-")
        indent = "  " * int(row["depth"])  # type: ignore[call-overload]
        print(f"{row['pid']:>8} {row.get('VmRSS', 0):>8} {row.get('RssAnon', 0):>6} {row.get('RssFile', 0):>6}"
              f"  ({was} -> {row.get('VmRSS', 0)})  {indent}{row['cmd']}")
    total = sum(int(r.get("VmRSS", 0)) for r in after)  # type: ignore[call-overload]
    total_start = sum(int(r.get("VmRSS", 0)) for r in started)  # type: ignore[call-overload]
    print(f"total RSS: {total_start} MiB at start, {total} MiB after one edge and one cloud request")
    if args.json is not None:
        write_json(args.json, {"routes": routes, "start": started, "after": after, "total_start_mib": total_start,
                               "total_mib": total})


if __name__ == "__main__":
    main()
