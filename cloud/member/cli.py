"""`edgeroute cloud serve`: a pool member, vLLM's OpenAI-compatible server launched and supervised
here (also `python -m cloud.member`)."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from models import EDGE_DEFAULT, EdgerouteError, default_models_dir

from ..config import MemberServerSettings
from ..twin import ensure_twin
from .launcher import launch
from .process import exit_with_parent
from .supervisor import Supervisor

cloud_app = typer.Typer(help="The cloud GPU pool and its member server.", no_args_is_help=True)


class DtypeChoice(str, Enum):
    auto = "auto"
    bfloat16 = "bfloat16"
    float16 = "float16"
    float32 = "float32"


class DeviceChoice(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


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
    device: Annotated[DeviceChoice, typer.Option(help="cpu, cuda, or auto (cuda where present)")] = DeviceChoice.auto,
    dtype: Annotated[
        DtypeChoice,
        typer.Option(help="weights and compute dtype (auto: bfloat16 where the CPU has bf16 instructions, else float32)"),
    ] = DtypeChoice.auto,
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
    startup_timeout: Annotated[float, typer.Option(min=1, help="seconds vLLM may take to start")] = 600.0,
    log_level: Annotated[str, typer.Option(help="vLLM server's log level")] = "warning",
    parent_pid: Annotated[
        Optional[int], typer.Option(hidden=True, help="exit when this process goes away")
    ] = None,
) -> None:
    """Serve a full-precision model with vLLM as an OpenAI-compatible pool member (/v1, /health,
    /metrics). Arguments after `--` go to vLLM's server as they are."""
    try:
        settings = MemberServerSettings(
            model=model,
            served_model_name=served_model_name,
            tensor_parallel=tensor_parallel,
            host=host,
            port=port,
            device=device.value,
            dtype=dtype.value,
            max_model_len=max_model_len,
            kv_cache_gib=kv_cache_gib,
            max_num_seqs=max_num_seqs,
            threads=threads,
            eager=eager,
            api_key=api_key,
            vllm_python=vllm_python,
            vllm_args=tuple(ctx.args),
            startup_timeout_s=startup_timeout,
            log_level=log_level.lower(),
            parent_pid=parent_pid,
        )
        if parent_pid is not None:
            exit_with_parent(parent_pid)
        start = launch(settings, Path(os.devnull), os.getpid())  # fail on a missing vLLM before converting
        start = launch(settings, ensure_twin(model, models_dir or default_models_dir()), os.getpid())
    except EdgerouteError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    code = Supervisor(settings, start, say=lambda line: typer.echo(line, err=True)).run()
    raise typer.Exit(code)
