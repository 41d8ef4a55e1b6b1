"""`edgeroute cloud serve` in the foreground: start vLLM's server, report its start-up, watch its
health, restart it with backoff when it dies or stops answering, and stop it (with every process
it made) on SIGTERM or SIGINT.

A server that never became ready is not restarted: that is a configuration problem (a model it
cannot load, a port in use, a CPU it cannot run on), and the supervisor exits with vLLM's reason.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import httpx

from ..config import MemberServerSettings
from ..errors import LocalMemberError, VllmUnavailableError
from .launcher import Launch
from .process import ServerProcess

log = logging.getLogger(__name__)

# /health failures in a row that make a running server count as hung.
_UNHEALTHY_AFTER = 3
# A server that served this long resets the restart backoff.
_STABLE_S = 60.0


def died_because(returncode: int | None) -> str:
    """Why a server process ended, in words (a signal by name)."""
    if returncode is None:
        return "it is still running"
    if returncode < 0:
        sig = signal.Signals(-returncode)
        why = f"killed by {sig.name}"
        if sig == signal.SIGILL:
            why += " (an illegal instruction: vLLM was built for CPU features this machine lacks)"
        return why
    return f"exited with code {returncode}"


class _Stopped(Exception):
    """Raised in the main thread by SIGTERM/SIGINT: leaves whatever wait is under way at once."""


class Supervisor:
    """Keeps one vLLM server up until :meth:`stop` (or SIGTERM/SIGINT under :meth:`run`)."""

    def __init__(
        self,
        settings: MemberServerSettings,
        start: Launch,
        *,
        log_path: Path | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.settings = settings
        self.start = start
        self.log_path = log_path
        self.say = say
        self.server: ServerProcess | None = None
        self.restarts = 0
        self._stopping = threading.Event()

    def _new_server(self) -> ServerProcess:
        return ServerProcess(
            self.start.argv,
            f"{self.start.root_url}/health",
            log_path=self.log_path,
            env=self.start.env,
            startup_timeout_s=self.settings.startup_timeout_s,
            label=f"vLLM server for {self.settings.name}",
        )

    def _progress(self, waited: float) -> None:
        self.say(f"vLLM is still starting ({waited:.0f}s: loading the model, warming up)")

    def boot(self) -> float:
        """Start the server and wait until it serves; the seconds it took. Raises LocalMemberError."""
        self.server = self._new_server()
        began = time.monotonic()
        self.server.spawn()
        try:
            self.server.wait_ready(progress=self._progress)
        except LocalMemberError as exc:
            code = self.server.proc.returncode if self.server.proc is not None else None
            self.server.kill()
            raise LocalMemberError(f"{exc.message}\n(vLLM {died_because(code)})") from exc
        return time.monotonic() - began

    def healthy(self, client: httpx.Client) -> bool:
        try:
            return client.get(f"{self.start.root_url}/health").status_code == 200
        except httpx.HTTPError:
            return False

    def watch(self) -> str:
        """Block while the server serves; return why it no longer does (or "" when stopping)."""
        assert self.server is not None
        misses = 0
        with httpx.Client(timeout=self.settings.health_interval_s) as client:
            while not self._stopping.wait(self.settings.health_interval_s):
                if not self.server.alive():
                    code = self.server.proc.returncode if self.server.proc is not None else None
                    return died_because(code)
                misses = 0 if self.healthy(client) else misses + 1
                if misses >= _UNHEALTHY_AFTER:
                    return f"/health failed {misses} times in a row"
        return ""

    def serve(self) -> None:
        """Boot, then keep the server up until :meth:`stop`; raises if the first boot fails."""
        for warning in self.start.warnings:
            self.say(f"warning: {warning}")
        on = f"{self.start.device} {self.start.cpu}".strip()
        threads = f", {self.settings.threads} thread(s)" if self.start.device == "cpu" and self.settings.threads else ""
        self.say(
            f"starting vLLM ({on}, {self.settings.tensor_parallel} rank(s), "
            f"{self.start.dtype}{threads}) on {self.start.root_url}"
        )
        took = self.boot()
        self.say(f"serving {self.settings.name} on {self.start.root_url}/v1 (ready in {took:.0f}s)")
        backoff = 1.0
        while not self._stopping.is_set():
            served_from = time.monotonic()
            why = self.watch()
            if self._stopping.is_set():
                break
            if time.monotonic() - served_from >= _STABLE_S:
                backoff = 1.0
            self.say(f"vLLM stopped serving ({why}); restarting in {backoff:.0f}s")
            assert self.server is not None
            self.server.kill()  # what is left of its process group: engine core, ranks
            if self._stopping.wait(backoff):
                break
            backoff = min(backoff * 2, self.settings.max_backoff_s)
            try:
                took = self.boot()
            except LocalMemberError as exc:
                self.say(f"restart failed: {exc.message}")
                continue
            self.say(f"serving again (ready in {took:.0f}s, restart {self.restarts + 1})")
            self.restarts += 1

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop supervising and stop the server: SIGTERM, then SIGKILL for its whole group."""
        self._stopping.set()
        if self.server is not None:
            self.server.stop(timeout_s)

    def run(self) -> int:
        """:meth:`serve` with SIGTERM and SIGINT stopping it cleanly; the exit code."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self._stopping.is_set():
                return  # already stopping: a second signal must not cut the stop short
            self.say(f"{signal.Signals(signum).name}: stopping vLLM")
            self._stopping.set()
            raise _Stopped

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.serve()
            return 0
        except _Stopped:
            return 0
        except (LocalMemberError, VllmUnavailableError) as exc:
            self.say(f"error: {exc.message}")
            return 1
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
