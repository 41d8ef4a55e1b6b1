"""Typed settings of the edge (the router composes them into the node's settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from models import EDGE_DEFAULT

from .cpus import auto_threads


class EdgeSettings(BaseModel):
    """The llama.cpp engine on the box."""

    model: str = Field(EDGE_DEFAULT, description="registry alias of the edge GGUF model")
    n_ctx: int = Field(
        2048, ge=128, le=131072, description="context window of one request (per slot; KV = n_ctx * slots)"
    )
    # "auto": edge/cpus.py (one core stays free for HTTP and the embedder).
    n_threads: int | Literal["auto"] = Field(
        "auto", description='llama.cpp threads for decode and prompt ("auto": physical cores less one)'
    )
    n_batch: int = Field(256, ge=8, description="most tokens in one llama_decode (decode tokens + prefill)")
    slots: int = Field(8, ge=1, le=64, description="sequences decoded together (continuous batching)")
    prefill_chunk: int = Field(
        64, ge=1, description="most prompt tokens evaluated per step, so long prompts never stall streams"
    )
    prefix_reuse: bool = Field(
        True, description="keep a slot's KV for prompts that start with the same tokens"
    )
    flash_attn: bool = Field(
        True, description="llama.cpp flash attention (also what keeps greedy output batch-independent)"
    )
    # q8_0 keys take the KV cache of 8 slots x 2048 tokens from ~360 to ~275 MiB and keep the node
    # with its local member under 1.5 GB (README); q8_0 values too would save as much again but
    # cost decode speed (docs/edge.md). llama.cpp quantizes V only with flash attention.
    kv_type_k: Literal["f16", "q8_0"] = Field("q8_0", description="KV cache type of the keys")
    kv_type_v: Literal["f16", "q8_0"] = Field("f16", description="KV cache type of the values")
    top_k: int = Field(40, ge=1, description="top-k of sampled (temperature > 0) requests")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="min-p of sampled requests")
    max_queue: int = Field(32, ge=1, description="requests waiting for a slot beyond this bound are refused")
    default_max_tokens: int = Field(256, ge=1, description="max_tokens when a request gives none")

    @model_validator(mode="after")
    def _batch_holds_every_slot(self) -> EdgeSettings:
        if self.kv_type_v != "f16" and not self.flash_attn:
            raise ValueError(f"kv_type_v {self.kv_type_v!r} needs flash_attn (llama.cpp quantizes V only with it)")
        if self.n_batch < self.slots:
            raise ValueError(f"n_batch ({self.n_batch}) must be at least slots ({self.slots})")
        return self

    @field_validator("n_threads", mode="before")
    @classmethod
    def _auto_or_a_count(cls, value: object) -> int | str:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value  # type: ignore[return-value]
        raise ValueError('n_threads must be "auto" or a whole number of threads >= 1')

    def threads(self) -> int:
        """The llama.cpp thread count: the setting, or for "auto" the physical cores less one."""
        return auto_threads() if self.n_threads == "auto" else int(self.n_threads)


class CacheSettings(BaseModel):
    """The SQLite-vector cache (exact and semantic layers) and its embedder."""

    enabled: bool = True
    path: Path | None = Field(None, description="the SQLite file (default: <data_dir>/cache.db)")
    semantic: bool = Field(True, description="also answer near-duplicate prompts (else exact only)")
    deterministic_only: bool = Field(
        False, description="cache only temperature-0 or seeded requests unless the request opts in"
    )
    # GPTCache's rule: a sampled request skips the lookup with probability 1 / (1 + e^(1/T)) (none at
    # 0, 0.27 at 1, every one from 2 on); its answer is still stored.
    skip_by_temperature: bool = Field(
        False, description="skip the lookup of sampled requests with a probability growing with temperature"
    )
    ttl_s: float | None = Field(7 * 86400.0, gt=0, description="entry lifetime in seconds (None: forever)")
    max_entries: int = Field(100_000, ge=1, description="size bound; least recently used entries go first")
    # Candidates below this cosine are never considered; above it, guards and the verifier decide.
    similarity_floor: float = Field(0.80, ge=0.0, le=1.0)
    verifier: bool = Field(True, description="False: accept on cosine >= similarity_floor alone")
    # The error budget: the threshold is the lowest verifier probability whose served hits were
    # wrong at most this often on the judged calibration replay shipped with the verifier.
    max_wrong_rate: float = Field(0.05, gt=0.0, lt=1.0, description="allowed share of wrong semantic hits")
    # ... with confidence: the one-sided upper confidence bound on that wrong rate (over the served
    # calibration hits) must stay within max_wrong_rate. Chosen by cross-validation on the
    # calibration data (`python -m bench.cache_calibration_cv`, docs/cache.md).
    budget_confidence: float = Field(
        0.8413, gt=0.0, lt=1.0, description="confidence that the budget holds (0.5 with wilson: point estimate)"
    )
    # The calibration replay is the data the verifier was fitted beside: on judged questions it was
    # not fitted to, the wrong rate at its threshold ran about twice as high (docs/cache.md,
    # `python -m bench.cache_holdout`). So the shipped threshold is the one whose calibration bound
    # is within this share of max_wrong_rate; ratings (POST /v1/feedback) then hold the budget itself.
    calibration_margin: float = Field(
        0.6, gt=0.0, le=1.0, description="share of max_wrong_rate the calibration replay must meet"
    )
    budget_bound: Literal["wilson", "clopper-pearson"] = Field(
        "wilson", description="the upper confidence bound on the wrong rate: Wilson score or exact Clopper-Pearson"
    )
    verifier_threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="explicit verifier probability to accept (None: from max_wrong_rate)"
    )
    # The calibration replay's say in each tenant's online budget, counted as this many ratings at
    # its own wrong rate / calibration_margin, so a tenant's first few ratings are weighed against
    # the replay's evidence, not alone (docs/cache.md). 0: the tenant's ratings alone.
    budget_prior_ratings: float = Field(
        150.0, ge=0.0, description="the calibration replay's weight in the online budget, in ratings"
    )
    feedback_veto_similarity: float = Field(
        0.85, ge=0.0, le=1.0,
        description="an entry rated wrong for a query is not served to queries at least this similar to it",
    )
    # Each tenant's budget log keeps its newest moves: a client flipping ratings cannot grow the file
    # without bound (the dashboard shows the newest 50).
    budget_log_rows: int = Field(1000, ge=1, description="threshold moves kept per tenant in the budget log")
    verifier_threads: int = Field(1, ge=1, description="ONNX Runtime threads of the verifier")
    guards: bool = Field(True, description="refuse matches that differ in negation, numbers, entities, order")
    candidates: int = Field(3, ge=1, le=16, description="nearest entries checked per lookup")
    nprobe: int = Field(8, ge=1, le=256, description="vector-index buckets searched per lookup")
    probe_k: int = Field(8, ge=1, le=64, description="nearest binary codes taken from each bucket")
    semantic_max_chars: int = Field(2000, ge=1, description="longer prompts use the exact layer only")
    embed_threads: int = Field(1, ge=1, description="ONNX Runtime threads of the embedder")
    embed_window_ms: float = Field(
        0.0, ge=0.0, le=50.0, description="micro-batching wait window (0: one event-loop turn)"
    )
    embed_max_batch: int = Field(
        32, ge=1, le=512, description="texts one model run is picked from, in turns across tenants"
    )
    embed_int8: bool = Field(True, description="the INT8-quantized ONNX model (else fp32 ONNX)")
    embed_device: Literal["cpu", "cuda"] = "cpu"

    def db_path(self, data_dir: Path) -> Path:
        return self.path if self.path is not None else Path(data_dir) / "cache.db"
