"""Typed settings of the cloud pool and of the member server (the router composes the pool's)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from models import EDGE_DEFAULT

# The member's weights in vLLM ("auto": see cloud.member.launcher.pick_dtype).
MemberDtype = Literal["auto", "bfloat16", "float16", "float32"]


class MemberSettings(BaseModel):
    """One OpenAI-compatible pool member."""

    name: str = Field(min_length=1)
    base_url: str = Field(description="e.g. http://10.0.0.5:8000/v1")
    api_key: str | None = None
    model: str = Field(description="model name the member serves")
    weight: float = Field(1.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")

    @property
    def root_url(self) -> str:
        """The server root, where `/health` and `/metrics` live (base_url without its `/v1`)."""
        return self.base_url.removesuffix("/v1")


class PoolSettings(BaseModel):
    """The cloud GPU pool: its members, timeouts, circuit breaker, retries and health checks."""

    members: list[MemberSettings] = Field(default_factory=list)
    local_member: bool = Field(True, description="start one local member when none is configured")
    local_model: str = Field(
        EDGE_DEFAULT, description="registry alias the local member (vLLM) serves: its full-precision twin"
    )
    local_tensor_parallel: int = Field(1, ge=1, description="vLLM ranks of the local member")
    local_dtype: MemberDtype = Field(
        "auto", description="dtype of the local member's weights (auto: bfloat16 where the CPU has bf16 instructions, else float32)"
    )
    local_kv_cache_gib: int = Field(1, ge=1, description="KV cache space of the local member, GiB")
    local_threads: int | None = Field(
        None, ge=1,
        description="CPU threads of the local member (default: the cores the edge's threads leave, at least 1)",
    )
    local_port: int | None = Field(
        None, ge=1, le=65535, description="port of the local member (default: free)"
    )
    local_startup_timeout_s: float = Field(
        600.0, gt=0, description="how long the local member may take to load and warm up"
    )

    connect_timeout_s: float = Field(2.0, gt=0, description="TCP connect timeout per attempt")
    first_token_timeout_s: float = Field(
        30.0, gt=0, description="from sending a request to its first token (queueing and prefill included)"
    )
    stall_timeout_s: float = Field(15.0, gt=0, description="longest silence allowed between two chunks")
    whole_timeout_s: float = Field(
        120.0,
        gt=0,
        description="a request for a whole (non-streamed) answer: from sending it to the whole answer "
        "(queueing, prefill and all of the generation)",
    )
    health_interval_s: float = Field(5.0, ge=0, description="active health checks period; 0 turns them off")
    health_timeout_s: float = Field(2.0, gt=0, description="timeout of one health probe")

    failure_threshold: int = Field(3, ge=1, description="consecutive failures that open a member's circuit")
    cooldown_s: float = Field(5.0, gt=0, description="open circuit wait before a half-open probe")
    max_cooldown_s: float = Field(60.0, gt=0, description="cooldown cap (it doubles after each failed probe)")

    retries: int = Field(
        2, ge=0, description="extra attempts before the first token (connect errors, 429, 5xx)"
    )
    backoff_initial_s: float = Field(0.05, ge=0, description="first retry backoff; doubles, with jitter")
    backoff_max_s: float = Field(1.0, ge=0)

    hedging: bool = Field(
        False, description="send a second attempt when the first is slow to its first token"
    )
    hedge_after_s: float = Field(2.0, gt=0, description="delay before the hedged attempt")

    max_connections: int = Field(64, ge=1, description="HTTP connections per member")
    stats_window: int = Field(200, ge=1, description="recent requests kept for p50 latency and TTFT")

    @model_validator(mode="after")
    def _unique_names(self) -> PoolSettings:
        names = [m.name for m in self.members]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"member names must be unique; repeated: {', '.join(dupes)}")
        return self


class MemberServerSettings(BaseModel):
    """`edgeroute cloud serve`: one pool member, vLLM's OpenAI-compatible server on a full-precision model."""

    model: str = Field(EDGE_DEFAULT, description="registry alias (its full-precision twin is served) or a model dir")
    served_model_name: str | None = Field(None, description="model id in the API (default: the alias)")
    tensor_parallel: int = Field(1, ge=1, le=64, description="vLLM's --tensor-parallel-size")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda where an NVIDIA device is present")
    dtype: MemberDtype = Field(
        "auto",
        description="weights and compute dtype (the fp32 twin is cast when loaded); auto: bfloat16 on a CPU "
        "with bf16 instructions (AVX-512 BF16, AMX), float32 on other CPUs, vLLM's choice on CUDA",
    )
    max_model_len: int = Field(2048, ge=16, description="prompt + completion tokens")
    kv_cache_gib: int = Field(1, ge=1, description="KV cache space in GiB (CPU: VLLM_CPU_KVCACHE_SPACE)")
    max_num_seqs: int | None = Field(None, ge=1, description="sequences decoded together (vLLM's default if unset)")
    threads: int | None = Field(
        None, ge=1, description="CPU: threads of each rank (OMP_NUM_THREADS; default: every core)"
    )
    eager: bool | None = Field(
        None,
        description="run the model without torch.compile / CUDA graphs; None: eager on a CPU "
        "(starts in seconds instead of minutes, decodes as fast there), compiled on CUDA",
    )
    api_key: str | None = None
    vllm_python: Path | None = Field(None, description="the Python of vLLM's environment (default: .venv-vllm)")
    models_dir: Path | None = Field(None, description="prepared models (default: the user's models cache)")
    vllm_args: tuple[str, ...] = Field((), description="more arguments for vLLM's server, passed as they are")
    startup_timeout_s: float = Field(600.0, gt=0, description="how long vLLM may take to load and compile")
    health_interval_s: float = Field(5.0, gt=0, description="how often the supervisor checks /health")
    max_backoff_s: float = Field(60.0, gt=0, description="longest wait before a restart (it doubles from 1 s)")
    log_level: str = "warning"

    @property
    def name(self) -> str:
        return self.served_model_name or self.model
