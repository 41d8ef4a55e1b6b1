"""The pool member server: an OpenAI-compatible server for a full-precision model, optionally
tensor parallel across ranks (torch.distributed, ``tp_plan="auto"``), or `vllm serve` on GPU hosts."""

from .main import serve
from .vllm import vllm_command
from .weights import ensure_weights, prepare_twin, twin_dir

__all__ = ["ensure_weights", "prepare_twin", "serve", "twin_dir", "vllm_command"]
