"""Proof that tensor parallelism really shards: each rank's local size of one projection weight.

Greedy text equal to the 1-rank member's would also come out of N ranks that each silently loaded
the whole model (``tp_plan`` ignored), so rank 0 gathers every rank's local ``numel`` of one
column-sharded weight at startup and publishes it (``GET /health``, the startup log line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import RankFailureError
from .group import Lockstep

# q_proj is column-wise sharded by the Llama-family ``tp_plan``: each rank holds heads/N of it.
SHARD_PARAM = "model.layers.0.self_attn.q_proj.weight"


@dataclass(frozen=True, slots=True)
class ShardReport:
    """``local_numel[r]``: elements of ``param`` held by rank ``r``; ``full_numel``: the unsharded size."""

    param: str
    full_numel: int
    local_numel: tuple[int, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "world_size": len(self.local_numel),
            "param": self.param,
            "full_numel": self.full_numel,
            "local_numel": list(self.local_numel),
        }


def _local_numel(model: Any, name: str) -> int:
    param = model.get_parameter(name)
    # Under tp_plan the weight may be a DTensor, whose numel() is the global size: count the shard.
    local = param.to_local() if hasattr(param, "to_local") else param
    return int(local.numel())


def _full_numel(model: Any) -> int:
    """Elements of the unsharded q_proj weight, from the config (a shard cannot tell its whole)."""
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return int(cfg.num_attention_heads * head_dim * cfg.hidden_size)


def gather_shards(model: Any, group: Lockstep) -> ShardReport:
    """Every rank calls this once, right after loading, at the same point of its startup."""
    try:
        sizes = group.gather_sizes(_local_numel(model, SHARD_PARAM))
    except RuntimeError as exc:  # a rank died or timed out during startup (gloo/nccl errors)
        raise RankFailureError(f"the ranks could not exchange their shard sizes: {exc}") from exc
    return ShardReport(SHARD_PARAM, _full_numel(model), tuple(sizes))
