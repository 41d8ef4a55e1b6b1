"""`edgeroute cloud serve`: a pool member, vLLM's OpenAI-compatible server launched and supervised
here (also `python -m cloud.member`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from models import EDGE_DEFAULT, EdgerouteError

from ..config import MemberDtype, MemberServerSettings
from .launcher import launch
from .supervisor import Supervisor

cloud_app = typer.Typer(help="The cloud GPU pool and its member server.", no_args_is_help=True)


@cloud_app.callback()
def _cloud() -> None:
    """The cloud GPU pool and its member server."""


@cloud_app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve(
    ctx: typer.Context,
    model: Annotated[
        str, typer.Option(help="registry alias (its full-precision twin is served) or a model dir")
    ] = EDGE_DEFAULT,
    tensor_parallel: Annotated[
        int, typer.Option("--tensor-parallel", min=1, help="vLLM ranks (--tensor-parallel-size)")
    ] = 1,
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8000,
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    device: Annotated[
        Literal["auto", "cpu", "cuda"], typer.Option(help="cpu, cuda, or auto (cuda where present)")
    ] = "auto",
    dtype: Annotated[
        MemberDtype,
        typer.Option(help="weights and compute dtype (auto: bfloat16 where the CPU has bf16 instructions, else float32)"),
    ] = "auto",
    max_model_len: Annotated[int, typer.Option(min=16, help="prompt + completion tokens")] = 2048,
    kv_cache_gib: Annotated[int, typer.Option(min=1, help="KV cache space, GiB")] = 1,
    max_num_seqs: Annotated[Optional[int], typer.Option(min=1, help="sequences decoded together")] = None,
    threads: Annotated[
        Optional[int], typer.Option(min=1, help="CPU: threads of one rank [default: every core]")
    ] = None,
    eager: Annotated[
        Optional[bool],
        typer.Option("--eager/--compile", help="eager mode, or torch.compile [default: eager on CPU, compiled on CUDA]"),
    ] = None,
    served_model_name: Annotated[
        Optional[str], typer.Option(help="model id in the API [default: --model]")
    ] = None,
    api_key: Annotated[
        Optional[str], typer.Option(envvar="EDGEROUTE_MEMBER_API_KEY", help="require this bearer key")
    ] = None,
    vllm_python: Annotated[
        Optional[Path],
        typer.Option(envvar="EDGEROUTE_VLLM_PYTHON", help="Python of vLLM's environment [default: .venv-vllm]"),
    ] = None,
    models_dir: Annotated[
        Optional[Path], typer.Option(envvar="EDGEROUTE_MODELS_DIR", help="prepared models")
    ] = None,
    startup_timeout_s: Annotated[
        float, typer.Option("--startup-timeout", min=1, help="seconds vLLM may take to start")
    ] = 600.0,
    log_level: Annotated[str, typer.Option(help="vLLM server's log level")] = "warning",
) -> None:
    """Serve a full-precision model with vLLM as an OpenAI-compatible pool member (/v1, /health,
    /metrics). Arguments after `--` go to vLLM's server as they are."""
    try:
        settings = MemberServerSettings(**ctx.params, vllm_args=tuple(ctx.args))
        start = launch(settings, os.getpid())
    except EdgerouteError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    code = Supervisor(settings, start, say=lambda line: typer.echo(line, err=True)).run()
    raise typer.Exit(code)
