"""`--engine vllm`: hand the same flags to `vllm serve` where vLLM is installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..config import MemberServerSettings
from ..errors import VllmUnavailableError


def vllm_command(settings: MemberServerSettings, weights: Path, executable: str = "vllm") -> list[str]:
    """The `vllm serve` command line equivalent to these member settings."""
    cmd = [
        executable,
        "serve",
        str(weights),
        "--served-model-name",
        settings.name,
        "--tensor-parallel-size",
        str(settings.tensor_parallel),
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--max-model-len",
        str(settings.max_model_len),
        "--dtype",
        settings.dtype,
    ]
    if settings.api_key:
        cmd += ["--api-key", settings.api_key]
    return cmd


def find_vllm() -> str:
    """The `vllm` executable, or a clear error saying it is not installed."""
    exe = shutil.which("vllm")
    if exe is None:
        raise VllmUnavailableError(
            "vLLM is not installed here (no `vllm` executable on PATH). Install it on a GPU host "
            "(`pip install vllm`) or use `--engine torch`.",
            param="engine",
            code="vllm_not_installed",
        )
    return exe


def exec_vllm(settings: MemberServerSettings, weights: Path) -> None:
    """Replace this process with `vllm serve` (does not return on success)."""
    exe = find_vllm()
    try:
        os.execv(exe, vllm_command(settings, weights, exe))
    except OSError as exc:  # found on PATH but not runnable (permissions, bad interpreter line...)
        raise VllmUnavailableError(
            f"could not execute {exe}: {exc}", param="engine", code="vllm_exec_failed"
        ) from exc
