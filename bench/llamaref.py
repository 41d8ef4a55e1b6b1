"""llama-cpp-python's own ``Llama`` and server, the references the edge is compared with, with the
model's weights laid out as the edge lays them out.

On a CPU with AMX, llama.cpp repacks the weights for its AMX kernels, which segfault in decode on
Sapphire Rapids VMs (``edge.cpus.has_amx``; the edge keeps the plain layout there).
``Llama`` and ``llama_cpp.server`` take no setting for it: their model parameters start from
``llama_model_default_params``, which :func:`plain_weights` wraps while a reference loads.

    python -m bench.llamaref --model M ...   # llama_cpp.server, its own flags
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from edge.cpus import has_amx


@contextmanager
def plain_weights() -> Iterator[None]:
    """While inside, a model llama-cpp-python loads keeps its plain weight layout on a CPU with AMX."""
    import llama_cpp.llama_cpp as lib

    default = lib.llama_model_default_params
    if not has_amx():
        yield
        return

    def plain() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = plain
    try:
        yield
    finally:
        lib.llama_model_default_params = default


def reference_llama(*args: Any, **kwargs: Any) -> Any:
    """``llama_cpp.Llama(*args, **kwargs)``, its weights as the edge lays them out."""
    from llama_cpp import Llama

    with plain_weights():
        return Llama(*args, **kwargs)


if __name__ == "__main__":
    # The server loads its model at start-up and keeps it: the layout holds for the whole process.
    with plain_weights():
        sys.argv = ["llama_cpp.server", *sys.argv[1:]]
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
