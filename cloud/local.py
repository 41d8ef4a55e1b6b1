"""Server processes this node starts itself: the local pool member (and, in tests, other servers).

Each runs in its own process group so stopping it takes every rank with it; a stop that is not
heeded within the timeout becomes SIGKILL, and an ``atexit`` hook (armed by the first spawn)
kills whatever is left. The member server also exits by itself if this process disappears
(``--parent-pid``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

import httpx

from models import EDGE_DEFAULT
from models.files import private_file

from .config import MemberSettings
from .errors import LocalMemberError
from .member.ranks import child_env, free_port, project_root

log = logging.getLogger(__name__)

_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()
_atexit_armed = False


def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.kill()


def _arm_atexit() -> None:
    """Register the leftover killer on the first spawn: importing this module has no side effect."""
    global _atexit_armed
    if not _atexit_armed:
        atexit.register(_kill_leftovers)
        _atexit_armed = True


class ServerProcess:
    """A child HTTP server, ready once ``ready_url`` answers 200."""

    def __init__(
        self,
        argv: Sequence[str],
        ready_url: str,
        *,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        startup_timeout_s: float = 300.0,
    ) -> None:
        self.argv = list(argv)
        self.ready_url = ready_url
        self.log_path = log_path
        self.env = env
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the process (its own session and process group); returns at once."""
        if self.alive():
            return
        out = private_file(self.log_path).open("ab") if self.log_path is not None else None
        try:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=str(project_root()),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                start_new_session=True,
            )
        except OSError as exc:
            raise LocalMemberError(f"could not start {self.argv[0]}: {exc}") from exc
        finally:
            if out is not None:
                out.close()
        _LIVE.add(self)
        _arm_atexit()

    def _failed_to_start(self, why: str) -> LocalMemberError:
        tail = ""
        if self.log_path is not None and self.log_path.is_file():
            tail = "\n" + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        return LocalMemberError(f"{' '.join(self.argv[:4])}...: {why}{tail}")

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Block until the server answers ``ready_url``; kill it and raise if it dies or times out."""
        deadline = time.monotonic() + (timeout_s or self.startup_timeout_s)
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc is None or self.proc.poll() is not None:
                    code = None if self.proc is None else self.proc.returncode
                    raise self._failed_to_start(f"exited with code {code} before it was ready")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.ready_url).status_code == 200:
                        return
                time.sleep(0.2)
        self.kill()
        raise self._failed_to_start(f"not ready after {timeout_s or self.startup_timeout_s:g}s")

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole process group now (idempotent)."""
        self._signal_group(signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        _LIVE.discard(self)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, a grace period, then SIGKILL for anything left in the group."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        self.kill()

    def restart(self, timeout_s: float | None = None) -> None:
        self.kill()
        self.spawn()
        self.wait_ready(timeout_s)


class LocalMember(ServerProcess):
    """`edgeroute cloud serve` as a child process of this node, for the pool's out-of-the-box member."""

    def __init__(
        self,
        *,
        model: str = EDGE_DEFAULT,
        tensor_parallel: int = 1,
        dtype: str | None = None,
        name: str = "local",
        host: str = "127.0.0.1",
        port: int | None = None,
        models_dir: Path | None = None,
        threads: int | None = None,
        extra_args: Sequence[str] = (),
        log_path: Path | None = None,
        startup_timeout_s: float = 300.0,
        restart: bool = False,
    ) -> None:
        self.name = name
        self.model = model
        self.host = host
        self.port = port or free_port(host)
        argv = [
            sys.executable,
            "-m",
            "cloud.member",
            "--model",
            model,
            "--tensor-parallel",
            str(tensor_parallel),
            "--host",
            host,
            "--port",
            str(self.port),
            "--parent-pid",
            str(os.getpid()),
        ]
        if threads is not None:
            argv += ["--threads", str(threads)]
        if dtype is not None:
            argv += ["--dtype", dtype]
        if models_dir is not None:
            argv += ["--models-dir", str(models_dir)]
        argv += list(extra_args)
        super().__init__(
            argv,
            f"http://{host}:{self.port}/health",
            log_path=log_path,
            env=child_env({}),
            startup_timeout_s=startup_timeout_s,
        )
        self.restart_on_exit = restart
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def settings(self) -> MemberSettings:
        """How the pool reaches this member."""
        return MemberSettings(name=self.name, base_url=f"http://{self.host}:{self.port}/v1", model=self.model)

    async def start(self) -> MemberSettings:
        """Start the member and wait until it serves (model loaded on every rank)."""
        self._stopping = False
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
        """Restart the member when it exits on its own (e.g. a tensor-parallel rank died)."""
        backoff = 1.0
        while not self._stopping:
            await asyncio.sleep(0.5)
            if self._stopping or self.alive():
                continue
            code = self.proc.returncode if self.proc is not None else None
            log.warning("local member %s exited (code %s); restarting in %.0fs", self.name, code, backoff)
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
