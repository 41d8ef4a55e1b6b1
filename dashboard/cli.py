"""The `edgeroute` command line, assembled in the top layer from every package's commands."""

from __future__ import annotations

import json
import logging
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from cloud import register_prepare_steps
from cloud.cli import cloud_app
from edge.cli import cache_app
from models import EdgerouteError, prepare, registry
from router import Settings, is_loopback, load_settings
from router.logs import configure_logging
from router.policy.cli import router_app

from .app import create_app

app = typer.Typer(help="edgeroute: an edge/cloud hybrid LLM routing node.", no_args_is_help=True)
models_app = typer.Typer(help="The bundled model artifacts.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(cache_app, name="cache")
app.add_typer(cloud_app, name="cloud")
app.add_typer(router_app, name="router")

class LogFormatChoice(str, Enum):
    text = "text"
    json = "json"


ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="TOML config file")]
DataDirOpt = Annotated[Optional[Path], typer.Option("--data-dir", help="data directory (cache, telemetry)")]


def _settings(config: Path | None, data_dir: Path | None, **overrides: object) -> Settings:
    try:
        return load_settings(config, data_dir=data_dir, **overrides)
    except EdgerouteError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


@app.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="bind address [default: 127.0.0.1]")] = None,
    port: Annotated[Optional[int], typer.Option(help="port [default: 8080]")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    log_level: Annotated[str, typer.Option(help="log level (debug, info, warning, error)")] = "info",
    log_format: Annotated[LogFormatChoice, typer.Option(help="text, or json: one object a line")] = LogFormatChoice.text,
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
    """Serve the OpenAI-compatible API (and the dashboard)."""
    import uvicorn

    settings = _settings(config, data_dir)
    server = settings.server.model_copy(
        update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    )
    exposed = not server.auth_enabled and not is_loopback(server.host)
    if exposed and not insecure_no_auth:
        typer.echo(
            f"error: refusing to serve {server.host} with no API keys: anyone who can reach it could use "
            "the node and read every tenant's prompts on the dashboard. Configure keys "
            "(server.api_keys, server.operator_keys; EDGEROUTE_SERVER__OPERATOR_KEYS), bind 127.0.0.1, "
            "or pass --insecure-no-auth.",
            err=True,
        )
        raise typer.Exit(2)
    cloud = settings.cloud
    if local_member is not None:
        cloud = cloud.model_copy(update={"local_member": local_member})
    settings = settings.model_copy(update={"server": server, "cloud": cloud})
    configure_logging(log_level, log_format.value)
    if exposed:
        logging.getLogger("edgeroute").warning(
            "--insecure-no-auth: serving %s with no API keys; anyone who can reach it has every tenant's data",
            server.host,
        )
    # uvicorn keeps its hands off logging (log_config=None): its lines go through the root handler
    # above; no access log, since the node writes its own line per request.
    # An open dashboard tab holds an SSE connection; do not let it block shutdown.
    uvicorn.run(
        create_app(settings),
        host=server.host,
        port=server.port,
        log_config=None,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )


@models_app.command("list")
def models_list(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print the model registry."""
    settings = _settings(config, data_dir)
    specs = registry(settings.models_dir)
    rows = [
        {
            "alias": s.alias,
            "kind": s.kind,
            "quantization": s.quantization,
            "context_length": s.context_length,
            "chat_template": s.chat_template,
            "present": s.present,
            "path": str(s.path),
        }
        for s in specs.values()
    ]
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


def main() -> None:
    app()
