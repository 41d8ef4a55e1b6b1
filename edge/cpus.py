"""How many physical cores this process may run on, the llama.cpp thread count they give, and
whether the CPU has AMX.

llama.cpp's threads spin-wait for each other at every step, so more threads than free cores (two
hyperthreads of one core, or a core the node's HTTP and embedding work also needs) slow decoding
down instead of speeding it up.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SYSFS_CPUS = Path("/sys/devices/system/cpu")


def physical_cores(cpus: Iterable[int] | None = None, sysfs: Path = SYSFS_CPUS) -> int:
    """Distinct (package, core) pairs among ``cpus`` (default: this process's affinity).

    Hyperthreads of one core count once. Where the topology cannot be read (not Linux, a
    container without /sys), every allowed logical CPU counts, else ``os.cpu_count()``.
    """
    if cpus is None and not hasattr(os, "sched_getaffinity"):  # the affinity is unknown here
        return max(1, os.cpu_count() or 1)
    allowed = set(cpus if cpus is not None else os.sched_getaffinity(0))
    cores: set[tuple[str, str]] = set()
    for cpu in allowed:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return max(1, len(allowed))
        cores.add((package, core))
    return max(1, len(cores))


def auto_threads(cpus: Iterable[int] | None = None, sysfs: Path = SYSFS_CPUS) -> int:
    """The physical cores less one (left to the node's HTTP and embedding work), at least 1."""
    return max(1, physical_cores(cpus, sysfs) - 1)


def has_amx(cpuinfo: str | None = None) -> bool:
    """Whether the first CPU of a ``/proc/cpuinfo`` text (None: this machine's) lists ``amx_int8``.

    llama.cpp's AMX kernels, fed weights repacked for them, segfault in decode on Sapphire Rapids
    VMs (https://github.com/ggml-org/llama.cpp/issues/20824): where this is true the edge keeps the
    weights in their plain layout."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = next((line.partition(":")[2].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return "amx_int8" in flags
