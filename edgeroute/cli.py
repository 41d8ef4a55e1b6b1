"""The `edgeroute` command line, assembled in the top layer from every package's commands."""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from cloud import register_prepare_steps
from cloud.cli import cloud_app
from dashboard.fleet import FleetSettings, create_fleet_app
from edge.cli import cache_app
from loadtest.faults import run_faults
from loadtest.loadgen import LoadConfig, Tenant, run_load, table
from models import EdgerouteError, prepare, registry
from router import Settings, is_loopback, load_settings
from router.logs import configure_logging
from router.cli import ConfigOpt, router_app
from router.server import serve as run_server
from router.settings import describe_errors
from router.training.cli import calibrate as calibrate_verifier
from router.training.cli import train_verifier

from .app import create_app

app = typer.Typer(help="edgeroute: an edge/cloud hybrid LLM routing node.", no_args_is_help=True)
models_app = typer.Typer(help="The bundled model artifacts.", no_args_is_help=True)
app.add_typer(models_app, name="models")
cache_app.command("calibrate")(calibrate_verifier)  # the verifier's offline commands: router.training
cache_app.command("train-verifier")(train_verifier)
app.add_typer(cache_app, name="cache")
app.add_typer(cloud_app, name="cloud")
app.add_typer(router_app, name="router")
bench_app = typer.Typer(help="Benchmarks against a running server.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

DataDirOpt = Annotated[Optional[Path], typer.Option("--data-dir", help="data directory (cache, telemetry)")]


def _settings(config: Path | None, data_dir: Path | None) -> Settings:
    try:
        return load_settings(config, data_dir=data_dir)
    except EdgerouteError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _exposed(host: str, auth_enabled: bool, insecure_no_auth: bool, refusal: str) -> bool:
    """Whether ``host`` is served to others with no key; without --insecure-no-auth that exits 2."""
    exposed = not auth_enabled and not is_loopback(host)
    if exposed and not insecure_no_auth:
        fix = "bind 127.0.0.1, or pass --insecure-no-auth."
        typer.echo(f"error: refusing to serve {host} with no {refusal}, {fix}", err=True)
        raise typer.Exit(2)
    return exposed


@app.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="bind address [default: 127.0.0.1]")] = None,
    port: Annotated[Optional[int], typer.Option(help="port [default: 8080]")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    log_level: Annotated[str, typer.Option(help="log level (debug, info, warning, error)")] = "info",
    log_format: Annotated[Literal["text", "json"], typer.Option(help="text, or json: one object a line")] = "text",
    local_member: Annotated[
        Optional[bool],
        typer.Option("--local-member/--no-local-member", help="start a local cloud member when none is configured"),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="serve a non-loopback address with no keys: anyone who reaches it uses the node and reads every tenant's data",
        ),
    ] = False,
) -> None:
    """Serve the OpenAI-compatible API (and the dashboard). SIGTERM drains: see docs/usage.md."""
    settings = _settings(config, data_dir)
    server = settings.server.model_copy(
        update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    )
    exposed = _exposed(
        server.host, server.auth_enabled, insecure_no_auth,
        "API keys: anyone who can reach it could use the node and read every tenant's prompts on the "
        "dashboard. Configure keys (server.api_keys, server.operator_keys; EDGEROUTE_SERVER__OPERATOR_KEYS)",
    )
    cloud = settings.cloud
    if local_member is not None:
        cloud = cloud.model_copy(update={"local_member": local_member})
    settings = settings.model_copy(update={"server": server, "cloud": cloud})
    configure_logging(log_level, log_format)
    if exposed:
        logging.getLogger("edgeroute").warning(
            "--insecure-no-auth: serving %s with no API keys; anyone who can reach it has every tenant's data",
            server.host,
        )
    # uvicorn keeps its hands off logging (its lines go through the root handler above); no
    # access log, since the node writes its own line per request.
    _return_large_blocks()
    run_server(create_app(settings), server, log_level=log_level)


@app.command()
def dashboard(
    prometheus: Annotated[
        str, typer.Option(envvar="EDGEROUTE_FLEET_PROMETHEUS", help="base URL of the Prometheus that scrapes the fleet")
    ],
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port")] = 8090,
    config: ConfigOpt = None,
    nodes_job: Annotated[str, typer.Option(help="Prometheus job of the nodes")] = "edgeroute",
    members_job: Annotated[str, typer.Option(help="Prometheus job of the vLLM pool members")] = "vllm",
    window: Annotated[str, typer.Option(help="window of route split, hit rates, percentiles")] = "5m",
    rate_window: Annotated[str, typer.Option(help="window of requests/s")] = "1m",
    tick_s: Annotated[float, typer.Option(help="seconds between live updates")] = 2.0,
    log_level: Annotated[str, typer.Option(help="log level (debug, info, warning, error)")] = "info",
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="serve a non-loopback address with no operator key")
    ] = False,
) -> None:
    """Serve the fleet dashboard: every node and vLLM member Prometheus scrapes, on one page.

    No node runs in this process; it reads Prometheus's HTTP API only. Operator keys come from
    the config file's [server] section (or EDGEROUTE_SERVER__OPERATOR_KEYS), as on a node.
    """
    from pydantic import ValidationError

    server = _settings(config, None).server
    try:
        fleet = FleetSettings(
            prometheus_url=prometheus, nodes_job=nodes_job, members_job=members_job, window=window,
            rate_window=rate_window, tick_s=tick_s,
        )
    except ValidationError as exc:
        typer.echo(f"error: invalid fleet options:\n{describe_errors(exc)}", err=True)
        raise typer.Exit(2) from exc
    _exposed(
        host, server.auth_enabled, insecure_no_auth,
        "operator key: anyone who can reach it would see the whole fleet. Configure server.operator_keys",
    )
    configure_logging(log_level, "text")
    import uvicorn

    uvicorn.run(
        create_fleet_app(fleet, server), host=host, port=port, log_config=None, log_level=log_level,
        access_log=False, timeout_graceful_shutdown=2,
    )


def _return_large_blocks() -> None:
    """Blocks of 1 MiB and more are mapped apart and returned to the system when freed: glibc
    otherwise keeps them in the freeing thread's arena, and the regions ONNX Runtime's arenas give
    back after each run (edge/embedder.py) stayed resident (docs/limits.md). Not glibc (musl,
    macOS): nothing to do."""
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the C library this process runs on
    if mallopt is not None:
        mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD (glibc's malloc.h)


@bench_app.command("faults")
def bench_faults(
    requests: Annotated[int, typer.Option(help="streamed requests in all")] = 1000,
    concurrency: Annotated[int, typer.Option(help="clients at once")] = 8,
    members: Annotated[int, typer.Option(help="scripted cloud members on loopback")] = 3,
    max_tokens: Annotated[int, typer.Option(help="max_tokens of every request")] = 24,
    error_rate: Annotated[float, typer.Option(help="share of member answers that are a 500")] = 0.2,
    cut_rate: Annotated[float, typer.Option(help="share of member streams cut mid-way")] = 0.2,
    seed: Annotated[int, typer.Option(help="seed of the faults and the chaos")] = 0,
    engine: Annotated[
        str, typer.Option(help="scripted: members that fail on purpose; vllm: vLLM members, killed now and then")
    ] = "scripted",
    data_dir: DataDirOpt = None,
) -> None:
    """Streams through a node whose members fail, die and come back: every stream must end with
    one [DONE] and at most max_tokens tokens (exit 1 otherwise)."""
    with tempfile.TemporaryDirectory(prefix="edgeroute-faults-") as tmp:
        report = run_faults(
            requests=requests, concurrency=concurrency, members=members, max_tokens=max_tokens,
            error_rate=error_rate, cut_rate=cut_rate, seed=seed, data_dir=data_dir or Path(tmp),
            app_factory=create_app, engine=engine,
        )
    typer.echo(report.summary())
    typer.echo("PASS" if report.ok() else "FAIL")
    if not report.ok():
        raise typer.Exit(1)


@models_app.command("list")
def models_list(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print the model registry."""
    settings = _settings(config, data_dir)
    specs = registry(settings.models_dir)
    fields = ("alias", "kind", "quantization", "context_length", "chat_template", "present")
    rows = [{k: getattr(s, k) for k in fields} | {"path": str(s.path)} for s in specs.values()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    header = f"{'alias':<24} {'kind':<11} {'quant':<7} {'context':>7}  template  present  path"
    typer.echo(header)
    for r in rows:
        typer.echo(
            f"{r['alias']:<24} {r['kind']:<11} {r['quantization']:<7} {str(r['context_length'] or '-'):>7}"
            f"  {'yes' if r['chat_template'] else 'no':<8}  {'yes' if r['present'] else 'no':<7}  {r['path']}"
        )


@models_app.command("prepare")
def models_prepare(config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Assemble chunked models and verify every checksum (one-time work)."""
    settings = _settings(config, data_dir)
    try:
        register_prepare_steps()  # the local cloud member's fp32 twin is built here too
        done = prepare(settings.models_dir, progress=True)
    except EdgerouteError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"ready: {', '.join(done)}")


@bench_app.command("load")
def bench_load(
    target: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible server (loopback only)")] = (
        "http://127.0.0.1:8080"
    ),
    scenario: Annotated[Literal["mix", "streams", "short-behind-long"], typer.Option(help="the workload")] = "mix",
    clients: Annotated[int, typer.Option(min=1, max=256, help="concurrent clients")] = 8,
    requests: Annotated[
        int, typer.Option(min=1, max=10_000_000, help="requests to send (at most; per tenant with --tenant)")
    ] = 64,
    duration: Annotated[float, typer.Option(min=1, max=3600, help="stop sending after this many s")] = 120.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens of short requests and streams")] = 64,
    long_max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens of long answers")] = 256,
    pairs: Annotated[
        Optional[Path], typer.Option(help="QQP pairs JSONL [default: ../shared/data/qqp_pairs.jsonl]")
    ] = None,
    model: Annotated[str, typer.Option(help="model field of every request")] = "auto",
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="let the node use its cache")] = True,
    api_key: Annotated[Optional[str], typer.Option(envvar="EDGEROUTE_API_KEY", help="bearer key")] = None,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    tenant: Annotated[
        Optional[list[str]],
        typer.Option(help="LABEL:APIKEY:CLIENTS, repeatable: groups of clients with their own key, reported "
                          "apart (instead of --clients/--api-key)"),
    ] = None,
    max_retries: Annotated[
        int, typer.Option(min=0, max=10, help="retries of a 429/408/409/5xx, waited out as the OpenAI SDK does")
    ] = 2,
    rss_pid: Annotated[Optional[int], typer.Option(help="sample this process's RSS (the node's) during the run")] = None,
    probe: Annotated[
        bool, typer.Option(help="also time one steady client per tenant, in its own process (cache hits)")
    ] = False,
    as_json: Annotated[Optional[Path], typer.Option("--json", help="also write the summary as JSON")] = None,
) -> None:
    """Concurrent streaming load over HTTP: tokens/s, latency and TTFT percentiles per route."""
    if pairs is None:
        default = Path.cwd().parent / "shared" / "data" / "qqp_pairs.jsonl"
        pairs = default if default.exists() else None
    cfg = LoadConfig(
        target=target, scenario=scenario, clients=clients, requests=requests, duration_s=duration,
        max_tokens=max_tokens, long_max_tokens=long_max_tokens, pairs=pairs, model=model, cache=cache,
        api_key=api_key, seed=seed, tenants=_tenants(tenant or []), max_retries=max_retries, rss_pid=rss_pid,
        probe=probe,
    )
    try:
        summary = asyncio.run(run_load(cfg))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(table(summary))
    if as_json is not None:
        as_json.parent.mkdir(parents=True, exist_ok=True)
        as_json.write_text(json.dumps(summary, indent=2))


def _tenants(specs: list[str]) -> list[Tenant]:
    out = []
    for spec in specs:
        label, _, rest = spec.partition(":")
        key, _, clients = rest.rpartition(":")
        if not label or not (clients.isascii() and clients.isdigit()) or not 1 <= int(clients) <= 256:
            typer.echo(f"error: --tenant wants LABEL:APIKEY:CLIENTS (1-256 clients), got label {label!r}", err=True)
            raise typer.Exit(2)
        out.append(Tenant(label, key or None, int(clients)))
    return out


def main() -> None:
    app()
