"""What the benchmarks share: the machine a run was measured on, and its JSON results."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cloud.member.launcher import cpu_flags
from cloud.member.launcher import describe_cpu as launcher_cpu

ISA = ("avx2", "avx512f", "avx512_bf16", "amx")


def describe_cpu(cpuinfo: str | None = None) -> dict[str, Any]:
    """The first CPU's model and the ISA flags that decide the engines' kernels, from ``cpuinfo``
    (None: this machine's ``/proc/cpuinfo``, empty where there is none)."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    flags = cpu_flags(cpuinfo)
    model = next((ln.partition(":")[2].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "")
    isa = {f: (any(x.startswith("amx") for x in flags) if f == "amx" else f in flags) for f in ISA}
    return {"model": model, "isa": isa, "text": launcher_cpu(cpuinfo, flags)}


def machine() -> str:
    return f"{platform.machine()} {os.cpu_count()} cores, {platform.python_version()}"


def percentile(values: Sequence[float], q: float) -> float:
    """Linear between ranks (numpy's); nan of no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def write_json(path: Path, data: Any, indent: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")


def md_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table, each column as wide as its widest cell: the first left-aligned, the others
    right-aligned, floats with three decimals."""
    cells = [list(header), *([f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("| " + " | ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in
                                       enumerate(zip(row, widths, strict=True))) + " |" for row in cells)
