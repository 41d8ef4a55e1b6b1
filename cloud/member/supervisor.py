"""Keeping vLLM's server up: start it, report its start-up, watch its health, restart it with
backoff when it dies or stops answering, and stop it (with every process it made). `edgeroute cloud
serve` runs it in the foreground (SIGTERM or SIGINT stop it); the node's local member in a thread.

A server that never became ready is not restarted: that is a configuration problem (a model it
cannot load, a port in use, a CPU it cannot run on), and the supervisor exits with vLLM's reason.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

import httpx

from ..config import MemberServerSettings
from ..errors import LocalMemberError
from .launcher import Launch
from .process import ServerProcess, died_because

# /health failures in a row that make a running server count as hung.
_UNHEALTHY_AFTER = 3
# A server that served this long resets the restart backoff.
_STABLE_S = 60.0


class _Stopped(Exception):
    """Raised in the main thread by SIGTERM/SIGINT: leaves whatever wait is under way at once."""


class Supervisor:
    """Keeps one vLLM server up until :meth:`stop` (or SIGTERM/SIGINT under :meth:`run`).

    ``server``: the process to keep up (the node's local member is one); by default one for ``start``.
    """

    def __init__(
        self,
        settings: MemberServerSettings,
        start: Launch,
        *,
        server: ServerProcess | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.settings = settings
        self.start = start
        self.say = say
        self.server = server or ServerProcess(
            start.argv,
            f"{start.root_url}/health",
            env=start.env,
            startup_timeout_s=settings.startup_timeout_s,
            label=f"vLLM server for {settings.name}",
        )
        self.restarts = 0
        self._stopping = threading.Event()
        self._spawning = threading.Lock()  # held from the stop check to the spawn: none after stop()

    def boot(self) -> float:
        """Start the server and wait until it serves; the seconds it took. Raises LocalMemberError."""
        began = time.monotonic()
        with self._spawning:
            if self._stopping.is_set():
                raise _Stopped
            self.server.spawn()
        self.server.wait_ready(
            progress=lambda waited: self.say(f"vLLM is still starting ({waited:.0f}s: loading the model, warming up)")
        )
        return time.monotonic() - began

    def watch(self) -> str:
        """Block while the server serves; return why it no longer does (or "" when stopping)."""
        misses = 0
        url = f"{self.start.root_url}/health"
        with httpx.Client(timeout=self.settings.health_interval_s) as client:
            while not self._stopping.wait(self.settings.health_interval_s):
                if not self.server.alive():
                    return died_because(self.server.proc.returncode if self.server.proc is not None else None)
                try:
                    misses = 0 if client.get(url).status_code == 200 else misses + 1
                except httpx.HTTPError:
                    misses += 1
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
        self.keep_up()

    def keep_up(self) -> None:
        """Restart the serving server whenever it stops serving, until :meth:`stop`."""
        backoff = 1.0
        while not self._stopping.is_set():
            served_from = time.monotonic()
            why = self.watch()
            if self._stopping.is_set():
                break
            if time.monotonic() - served_from >= _STABLE_S:
                backoff = 1.0
            self.say(f"vLLM stopped serving ({why}); restarting in {backoff:.0f}s")
            self.server.kill()  # what is left of its process group: engine core, ranks
            if self._stopping.wait(backoff):
                break
            backoff = min(backoff * 2, self.settings.max_backoff_s)
            try:
                took = self.boot()
            except (LocalMemberError, _Stopped) as exc:
                if not self._stopping.is_set():
                    self.say(f"restart failed: {exc}")
                continue
            self.say(f"serving again (ready in {took:.0f}s, restart {self.restarts + 1})")
            self.restarts += 1

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop supervising and stop the server: SIGTERM, then SIGKILL for its whole group."""
        with self._spawning:
            self._stopping.set()
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
        except LocalMemberError as exc:
            self.say(f"error: {exc.message}")
            return 1
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
