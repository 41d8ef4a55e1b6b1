"""The node's own pool member: vLLM's server on the edge model's full-precision twin, started as a
child process of the node, restarted with backoff when it dies, and stopped with every process it
made (its own process group; it also goes by itself if the node disappears)."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from models import EDGE_DEFAULT, EdgerouteError, default_models_dir

from .config import MemberDtype, MemberServerSettings, MemberSettings
from .errors import LocalMemberError
from .member.launcher import launch
from .member.process import ServerProcess, free_port
from .member.supervisor import died_because
from .twin import ensure_twin

__all__ = ["LocalMember", "ServerProcess", "free_port"]

log = logging.getLogger(__name__)


class LocalMember(ServerProcess):
    """vLLM's server as a child process of this node, for the pool's out-of-the-box member."""

    def __init__(
        self,
        *,
        model: str = EDGE_DEFAULT,
        tensor_parallel: int = 1,
        dtype: MemberDtype = "auto",
        kv_cache_gib: int = 1,
        threads: int | None = None,
        name: str = "local",
        host: str = "127.0.0.1",
        port: int | None = None,
        models_dir: Path | None = None,
        extra_args: Sequence[str] = (),
        log_path: Path | None = None,
        startup_timeout_s: float = 600.0,
        restart: bool = False,
    ) -> None:
        self.name = name
        self.model = model
        self.host = host
        self.port = port or free_port(host)
        self.models_dir = models_dir or default_models_dir()
        # A key of its own for every node that starts it: any other process on the host that calls
        # the member directly would go around the node's tenant keys, limits, caps and cache.
        self.api_key = secrets.token_urlsafe(32)
        self.member_settings = MemberServerSettings(
            model=model,
            served_model_name=model,
            tensor_parallel=tensor_parallel,
            host=host,
            port=self.port,
            dtype=dtype,
            kv_cache_gib=kv_cache_gib,
            threads=threads,
            vllm_args=tuple(extra_args),
            startup_timeout_s=startup_timeout_s,
            api_key=self.api_key,
        )
        self.chosen = ""  # "bfloat16 on AMD EPYC (avx2 avx512f avx512_bf16)", once prepared
        super().__init__(
            [],
            f"http://{host}:{self.port}/health",
            log_path=log_path,
            startup_timeout_s=startup_timeout_s,
            label=f"the local vLLM member ({model})",
        )
        self.restart_on_exit = restart
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False

    def prepare(self) -> None:
        """Resolve the model (making its twin if needed) and the vLLM command; raises LocalMemberError."""
        if self.argv:
            return
        try:
            start = launch(self.member_settings, ensure_twin(self.model, self.models_dir), os.getpid())
        except EdgerouteError as exc:
            raise LocalMemberError(f"{self.label}: {exc.message}", code=exc.code) from exc
        for warning in start.warnings:
            log.warning("local member %s: %s", self.name, warning)
        self.chosen = f"{start.dtype} on {start.cpu}" if start.cpu else start.dtype
        if start.device == "cpu":
            threads = self.member_settings.threads
            self.chosen += f", {threads} thread(s)" if threads else ", a thread per core"
        self.argv, self.env = start.argv, start.env

    def spawn(self) -> None:
        self.prepare()
        super().spawn()

    def _failed_to_start(self, why: str) -> LocalMemberError:
        if self.proc is not None and self.proc.returncode is not None:
            why = f"{why} (vLLM {died_because(self.proc.returncode)})"
        return super()._failed_to_start(why)

    @property
    def settings(self) -> MemberSettings:
        """How the pool reaches this member."""
        return MemberSettings(
            name=self.name, base_url=f"http://{self.host}:{self.port}/v1", model=self.model, api_key=self.api_key
        )

    async def start(self) -> MemberSettings:
        """Start the member and wait until it serves (model loaded on every rank)."""
        self._stopping = False
        await asyncio.to_thread(self.prepare)  # a missing twin is made here: tens of seconds
        self.spawn()
        try:
            await asyncio.to_thread(self.wait_ready)
        except BaseException:
            self.kill()
            raise
        if self.restart_on_exit and self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name=f"supervise-{self.name}")
        return self.settings

    async def _supervise(self) -> None:
        """Restart the member when it exits on its own (e.g. it was killed, or a rank died)."""
        backoff = 1.0
        while not self._stopping:
            await asyncio.sleep(0.5)
            if self._stopping or self.alive():
                continue
            code = self.proc.returncode if self.proc is not None else None
            log.warning("local member %s %s; restarting in %.0fs", self.name, died_because(code), backoff)
            self.kill()  # what is left of its process group (engine core, ranks) holds the port
            await asyncio.sleep(backoff)
            if self._stopping:
                return
            try:
                self.spawn()
                await asyncio.to_thread(self.wait_ready)
                backoff = 1.0
            except LocalMemberError as exc:
                log.error("local member %s failed to restart: %s", self.name, exc.message)
                backoff = min(backoff * 2, 60.0)

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Stop supervising and stop the member (SIGTERM, then SIGKILL)."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
            self._supervisor = None
        await asyncio.to_thread(self.stop, timeout_s)
