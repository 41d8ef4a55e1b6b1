"""The node's own pool member: vLLM's server on the edge model's full-precision twin, started as a
child process of the node, restarted with backoff when it dies or hangs, and stopped with every
process it made (its own process group; it also goes by itself if the node disappears)."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from models import EdgerouteError

from .config import MemberServerSettings, MemberSettings
from .errors import LocalMemberError
from .member.launcher import Launch, launch
from .member.process import ServerProcess, free_port
from .member.supervisor import Supervisor

__all__ = ["LocalMember", "ServerProcess", "free_port"]

log = logging.getLogger(__name__)


class LocalMember(ServerProcess):
    """vLLM's server as a child process of this node, for the pool's out-of-the-box member."""

    def __init__(
        self,
        *,
        name: str = "local",
        port: int | None = None,
        log_path: Path | None = None,
        restart: bool = False,
        **member: Any,
    ) -> None:
        """``member``: the :class:`MemberServerSettings` of the server (model, tensor_parallel,
        dtype, kv_cache_gib, threads, models_dir, startup_timeout_s)."""
        self.name = name
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        # A key of its own for every node that starts it: any other process on the host that calls
        # the member directly would go around the node's tenant keys, limits, caps and cache.
        self.api_key = secrets.token_urlsafe(32)
        self.member_settings = MemberServerSettings(**member, host=self.host, port=self.port, api_key=self.api_key)
        self.model = self.member_settings.model
        self.chosen = ""  # "bfloat16 on AMD EPYC (avx2 avx512f avx512_bf16)", once prepared
        self.launch: Launch | None = None
        super().__init__(
            [],
            f"http://{self.host}:{self.port}/health",
            log_path=log_path,
            startup_timeout_s=self.member_settings.startup_timeout_s,
            label=f"the local vLLM member ({self.model})",
        )
        self.restart_on_exit = restart
        self._supervisor: Supervisor | None = None

    def prepare(self) -> Launch:
        """Resolve the model (making its twin if needed) and the vLLM command; raises LocalMemberError."""
        if self.launch is not None:
            return self.launch
        try:
            start = launch(self.member_settings, os.getpid())
        except EdgerouteError as exc:
            raise LocalMemberError(f"{self.label}: {exc.message}", code=exc.code) from exc
        for warning in start.warnings:
            self._say(warning)
        self.chosen = f"{start.dtype} on {start.cpu}" if start.cpu else start.dtype
        if start.device == "cpu":
            threads = self.member_settings.threads
            self.chosen += f", {threads} thread(s)" if threads else ", a thread per core"
        self.argv, self.env, self.launch = start.argv, start.env, start
        return start

    def spawn(self) -> None:
        self.prepare()
        super().spawn()

    @property
    def settings(self) -> MemberSettings:
        """How the pool reaches this member."""
        return MemberSettings(
            name=self.name, base_url=f"http://{self.host}:{self.port}/v1", model=self.model, api_key=self.api_key
        )

    async def start(self) -> MemberSettings:
        """Start the member and wait until it serves (model loaded on every rank); with ``restart``,
        a supervisor thread (`cloud serve`'s) then restarts it whenever it dies or hangs."""
        start = await asyncio.to_thread(self.prepare)  # a missing twin is made here: tens of seconds
        self.spawn()
        try:
            await asyncio.to_thread(self.wait_ready)
        except BaseException:
            self.kill()
            raise
        if self.restart_on_exit and self._supervisor is None:
            self._supervisor = Supervisor(self.member_settings, start, server=self, say=self._say)
            keep_up = self._supervisor.keep_up
            threading.Thread(target=keep_up, name=f"supervise-{self.name}", daemon=True).start()
        return self.settings

    def _say(self, line: str) -> None:
        log.warning("local member %s: %s", self.name, line)

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Stop supervising and stop the member (SIGTERM, then SIGKILL)."""
        supervisor, self._supervisor = self._supervisor, None
        await asyncio.to_thread(self.stop if supervisor is None else supervisor.stop, timeout_s)
