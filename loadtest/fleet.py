"""A fleet on one box: Prometheus, edge nodes and the fleet dashboard on loopback (`make fleet`).

Every part is the real one: `edgeroute serve` per node (each its own data dir and name),
Debian's Prometheus scraping their /metrics with an operator key and evaluating the shipped
alert rules (deploy/prometheus/edgeroute-rules.yml), and `edgeroute dashboard --prometheus`.
Tests use :class:`Fleet` too, with a short scrape interval.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from cloud.local import LocalMember, ServerProcess

from .servers import EDGEROUTE, REPO, edgeroute_node, free_port

RULES = REPO / "deploy" / "prometheus" / "edgeroute-rules.yml"


def prometheus_binary() -> Path | None:
    """Prometheus as the Makefile installs it (Debian's package): on PATH, else /usr/bin."""
    found = shutil.which("prometheus") or shutil.which("prometheus", path="/usr/bin")
    return Path(found) if found else None


def prometheus_config(
    nodes: Sequence[str], members: Sequence[str], *, interval_s: float, key_file: Path
) -> dict[str, object]:
    """The shipped prometheus.yml's two jobs, for loopback targets (``host:port``); JSON is YAML."""
    interval = f"{int(interval_s * 1000)}ms"

    def job(name: str, targets: Sequence[str]) -> dict[str, object]:
        return {"job_name": name, "scrape_interval": interval, "scrape_timeout": f"{int(interval_s * 800)}ms",
                "static_configs": [{"targets": list(targets)}]}

    node_job = job("edgeroute", nodes)
    node_job["authorization"] = {"type": "Bearer", "credentials_file": str(key_file)}
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(RULES)],
        "scrape_configs": [node_job, job("vllm", members)],
    }


@dataclass
class Fleet:
    """Nodes, an optional pool member, Prometheus and the fleet dashboard, as child processes."""

    root: Path
    nodes: int = 3
    interval_s: float = 1.0
    operator_key: str = "fleet-operator-key"
    tenant_keys: dict[str, str] = field(default_factory=lambda: {"fleet-tenant-key": "acme"})
    member: bool = False  # a local vLLM pool member (its /metrics carry vLLM's load gauges)
    running_member: LocalMember | None = None  # instead, one already serving (neither started nor stopped here)
    dashboard_port: int | None = None
    prometheus_port: int | None = None
    startup_timeout_s: float = 300.0
    node_procs: list[ServerProcess] = field(default_factory=list)
    node_names: list[str] = field(default_factory=list)
    node_addrs: list[str] = field(default_factory=list)
    member_proc: ServerProcess | None = None
    member_addr: str | None = None
    prometheus: ServerProcess | None = None
    dashboard: ServerProcess | None = None

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def node_url(self, i: int) -> str:
        return f"http://{self.node_addrs[i]}"

    def _config(self, member: LocalMember | None) -> Path:
        keys = ", ".join(f'"{k}" = "{t}"' for k, t in self.tenant_keys.items())
        text = (f'[server]\noperator_keys = ["{self.operator_key}"]\napi_keys = {{ {keys} }}\n'
                "[telemetry.dashboard]\ntick_s = 1.0\n")
        if member is not None:
            # Every node's cloud pool is the one member, as a fleet shares one pool.
            m = member.settings
            text += (
                f'[[cloud.members]]\nname = "{m.name}"\nbase_url = "{m.base_url}"\nmodel = "{m.model}"\n'
                f'api_key = "{m.api_key}"\n'
            )
        path = self.root / "edgeroute.toml"
        path.write_text(text)
        return path

    def start(self) -> Fleet:
        """Start everything; return once each part answers (nodes start side by side)."""
        self.root.mkdir(parents=True, exist_ok=True)
        member = self.running_member
        if member is not None:
            self.member_addr = f"127.0.0.1:{member.port}"
        elif self.member:
            member = LocalMember(name="pool-1", log_path=self.root / "member.log",
                                 startup_timeout_s=self.startup_timeout_s)
            member.spawn()
            self.member_proc, self.member_addr = member, f"127.0.0.1:{member.port}"
        config = self._config(member)
        for i in range(self.nodes):
            port, name = free_port(), f"edge-{i + 1}"
            proc = edgeroute_node("--config", str(config), "--data-dir", str(self.root / name), "--no-local-member",
                                  "--log-level", "warning", port=port, log_path=self.root / f"{name}.log",
                                  env={"EDGEROUTE_SERVER__NODE_NAME": name, "HF_HUB_OFFLINE": "1"},
                                  timeout=self.startup_timeout_s)
            proc.spawn()
            self.node_procs.append(proc)
            self.node_names.append(name)
            self.node_addrs.append(f"127.0.0.1:{port}")
        self._start_prometheus()
        self._start_dashboard(config)
        for proc in [*self.node_procs, *filter(None, [self.member_proc, self.prometheus, self.dashboard])]:
            proc.wait_ready()
        if self.member_addr is not None:
            for i in range(self.nodes):
                self._wait_member_seen(self.node_url(i))
        return self

    def _wait_member_seen(self, base: str, timeout_s: float = 60.0) -> None:
        """Until the node's pool has found the member healthy (its health probe runs on its own
        clock), so that the first cloud request is not answered by the edge as degraded."""
        deadline = time.monotonic() + timeout_s
        headers = {"authorization": f"Bearer {self.operator_key}"}
        while time.monotonic() < deadline:
            text = httpx.get(base + "/metrics", headers=headers, timeout=10).text
            if any(line.startswith("edgeroute_pool_member_up{") and line.endswith(" 1.0") for line in text.splitlines()):
                return
            time.sleep(0.2)
        raise TimeoutError(f"{base}: the pool member was not seen healthy within {timeout_s:.0f} s")

    def _start_prometheus(self) -> None:
        binary = prometheus_binary()
        if binary is None:
            raise FileNotFoundError("prometheus is not installed (`make prometheus`, or apt-get install "
                                    "prometheus)")
        key_file = self.root / "operator-key"
        key_file.write_text(self.operator_key)
        key_file.chmod(0o600)
        members = [self.member_addr] if self.member_addr else []
        cfg = prometheus_config(self.node_addrs, members, interval_s=self.interval_s, key_file=key_file)
        (self.root / "prometheus.yml").write_text(json.dumps(cfg, indent=2))
        self.prometheus_port = self.prometheus_port or free_port()
        argv = [str(binary), f"--config.file={self.root / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.root / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{self.prometheus_port}", "--storage.tsdb.retention.time=1d",
                "--log.level=warn"]
        self.prometheus = ServerProcess(argv, f"{self.prometheus_url}/-/ready",
                                        log_path=self.root / "prometheus.log")
        self.prometheus.spawn()

    def _start_dashboard(self, config: Path) -> None:
        self.dashboard_port = self.dashboard_port or free_port()
        argv = [*EDGEROUTE, "dashboard", "--prometheus", self.prometheus_url,
                "--port", str(self.dashboard_port), "--config", str(config),
                "--rate-window", f"{max(4, int(self.interval_s * 4))}s", "--tick-s", str(self.interval_s),
                "--log-level", "warning"]
        self.dashboard = ServerProcess(argv, f"{self.dashboard_url}/fleet/static/app.css",
                                       log_path=self.root / "dashboard.log")
        self.dashboard.spawn()

    def stop(self) -> None:
        for proc in [self.dashboard, self.prometheus, self.member_proc, *self.node_procs]:
            if proc is not None:
                proc.stop(timeout_s=15)


PROMPTS = ("What is the capital of France?", "Name a primary colour.", "What is 2 + 2?",
           "Say hello in Spanish.")


def send_traffic(base: str, api_key: str, rounds: int = 2, max_tokens: int = 8, cloud: bool = False) -> int:
    """Short chat requests, each prompt ``rounds`` times (repeats are cache hits); requests sent.

    With ``cloud``, the first prompt of each round asks for the cloud pool (``model: cloud``).
    """
    sent = 0
    with httpx.Client(base_url=base, timeout=120, headers={"authorization": f"Bearer {api_key}"}) as client:
        for _ in range(rounds):
            for i, prompt in enumerate(PROMPTS):
                body = {"model": "cloud" if cloud and i == 0 else "auto", "max_tokens": max_tokens,
                        "messages": [{"role": "user", "content": prompt}], "temperature": 0}
                client.post("/v1/chat/completions", json=body).raise_for_status()
                sent += 1
    return sent


def main() -> None:
    """`make fleet`: bring the fleet up, send it a little traffic, keep it up until Ctrl-C."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--member", action="store_true",
                        help="also start a local pool member, the nodes' cloud pool")
    parser.add_argument("--port", type=int, default=8090, help="the fleet dashboard's port")
    parser.add_argument("--prometheus-port", type=int, default=9090)
    parser.add_argument("--interval", type=float, default=2.0, help="scrape interval, seconds")
    parser.add_argument("--root", type=Path, default=None, help="data of the run [default: a temp dir]")
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="edgeroute-fleet-"))
    fleet = Fleet(root, nodes=args.nodes, interval_s=args.interval, member=args.member,
                  dashboard_port=args.port, prometheus_port=args.prometheus_port)
    print(f"starting {args.nodes} nodes, Prometheus and the fleet dashboard (logs in {root}) ...", flush=True)
    try:
        fleet.start()
        for i in range(args.nodes):
            n = send_traffic(fleet.node_url(i), next(iter(fleet.tenant_keys)), cloud=args.member)
            print(f"  {fleet.node_names[i]} at {fleet.node_url(i)}: {n} requests sent", flush=True)
        print(f"\nfleet dashboard: {fleet.dashboard_url}/fleet  (operator key: {fleet.operator_key})")
        print(f"Prometheus:      {fleet.prometheus_url}  (alerts: {fleet.prometheus_url}/alerts)")
        print("Ctrl-C stops everything.", flush=True)
        while all(p.alive() for p in fleet.node_procs):
            time.sleep(1)
        print("a node stopped; see its log", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()


if __name__ == "__main__":
    main()
