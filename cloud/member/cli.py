"""`edgeroute cloud serve`: the member server's command (also `python -m cloud.member`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from models import EDGE_DEFAULT, EdgerouteError, default_models_dir

from ..config import MemberServerSettings
from .main import serve as serve_member

cloud_app = typer.Typer(help="The cloud GPU pool and its member server.", no_args_is_help=True)


class EngineChoice(str, Enum):
    torch = "torch"
    vllm = "vllm"


class DtypeChoice(str, Enum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class DeviceChoice(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


@cloud_app.callback()
def _cloud() -> None:
    """The cloud GPU pool and its member server."""


@cloud_app.command()
def serve(
    model: Annotated[
        str, typer.Option(help="registry alias (its fp32 twin is served) or a model dir")
    ] = EDGE_DEFAULT,
    tensor_parallel: Annotated[
        int, typer.Option("--tensor-parallel", min=1, help="ranks (torch.distributed)")
    ] = 1,
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8000,
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    engine: Annotated[
        EngineChoice, typer.Option(help="torch here; vllm execs `vllm serve` where installed")
    ] = EngineChoice.torch,
    device: Annotated[DeviceChoice, typer.Option(help="cpu, cuda, or auto")] = DeviceChoice.auto,
    dtype: Annotated[
        DtypeChoice, typer.Option(help="weights dtype (the fp32 twin is cast when loaded)")
    ] = DtypeChoice.bfloat16,
    threads: Annotated[Optional[int], typer.Option(min=1, help="torch threads per rank")] = None,
    max_model_len: Annotated[int, typer.Option(min=16, help="prompt + completion tokens")] = 2048,
    served_model_name: Annotated[
        Optional[str], typer.Option(help="model id in the API [default: --model]")
    ] = None,
    api_key: Annotated[
        Optional[str], typer.Option(envvar="EDGEROUTE_MEMBER_API_KEY", help="require this bearer key")
    ] = None,
    models_dir: Annotated[
        Optional[Path], typer.Option(envvar="EDGEROUTE_MODELS_DIR", help="prepared models")
    ] = None,
    log_level: Annotated[str, typer.Option(help="log level")] = "warning",
    parent_pid: Annotated[
        Optional[int], typer.Option(hidden=True, help="exit when this process goes away")
    ] = None,
) -> None:
    """Serve a full-precision model as an OpenAI-compatible pool member (with /health and /metrics)."""
    try:
        settings = MemberServerSettings(
            model=model,
            served_model_name=served_model_name,
            tensor_parallel=tensor_parallel,
            host=host,
            port=port,
            engine=engine.value,
            device=device.value,
            dtype=dtype.value,
            threads=threads,
            max_model_len=max_model_len,
            api_key=api_key,
            log_level=log_level.lower(),
            parent_pid=parent_pid,
        )
        serve_member(settings, models_dir or default_models_dir())
    except EdgerouteError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
