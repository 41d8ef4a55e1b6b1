"""Server processes: a child HTTP server in its own process group (started, awaited, stopped with
every process it made), free ports, and the lifeline that keeps a server from outliving its parent.

Used by the member's supervisor, the node's local member, and the tests' and benchmarks' servers.
A stop that is not heeded within the timeout becomes SIGKILL for the whole group, and an
``atexit`` hook (armed by the first spawn) kills whatever is left.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import socket
import subprocess
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from models.files import private_file

from ..errors import LocalMemberError

def project_root() -> Path:
    """The directory holding the ``cloud`` package, for child processes' ``PYTHONPATH``."""
    return Path(__file__).resolve().parents[2]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# Runs a Python module (``python -c LIFELINE PARENT_PID MODULE ARGS...``) after arming a watch that
# kills its process group once PARENT_PID is no longer its parent, written out so it needs nothing of this project: the vLLM server runs under it in
# vLLM's own environment, and its whole process group goes when its parent does. A file named by
# $EDGEROUTE_MEMBER_GUARD is loaded first as the module ``edgeroute_member_guard`` (guard.py: vLLM
# adds its middleware by that import path).
LIFELINE = (
    "import importlib.util, os, runpy, sys, threading, time\n"
    "parent = int(sys.argv[1])\n"
    "def watch():\n"
    "    while os.getppid() == parent:\n"
    "        time.sleep(0.25)\n"
    "    os.killpg(os.getpgid(0), 9)\n"
    "threading.Thread(target=watch, name='parent-watch', daemon=True).start()\n"
    "guard_file = os.environ.get('EDGEROUTE_MEMBER_GUARD')\n"
    "if guard_file:\n"
    "    spec = importlib.util.spec_from_file_location('edgeroute_member_guard', guard_file)\n"
    "    sys.modules[spec.name] = guard = importlib.util.module_from_spec(spec)\n"
    "    spec.loader.exec_module(guard)\n"
    "sys.argv = [sys.argv[2], *sys.argv[3:]]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def wait_ready(
    url: str,
    alive: Callable[[], bool],
    timeout: float,
    what: str = "the server",
    ready: Callable[[httpx.Response], bool] = lambda response: response.status_code == 200,
    progress: Callable[[float], None] | None = None,
) -> None:
    """Return once ``url`` answers 200 (or ``ready(response)``); raise RuntimeError when ``alive()``
    turns False, TimeoutError when ``timeout`` passes. ``progress`` is called about every 10 s with
    the seconds waited so far."""
    started = told = time.monotonic()
    while True:
        if not alive():
            raise RuntimeError(f"{what} stopped during start-up")
        try:
            if ready(httpx.get(url, timeout=2)):
                return
        except (httpx.HTTPError, ValueError):
            pass
        now = time.monotonic()
        if now - started > timeout:
            raise TimeoutError(f"{what} not ready after {timeout:g}s")
        if progress is not None and now - told >= 10:
            told = now
            progress(now - started)
        time.sleep(0.1)


def died_because(returncode: int | None) -> str:
    """Why a server process ended, in words (a signal by name)."""
    if returncode is None:
        return "it was never started"
    if returncode < 0:
        sig = signal.Signals(-returncode)
        why = f"killed by {sig.name}"
        if sig == signal.SIGILL:
            why += " (an illegal instruction: vLLM was built for CPU features this machine lacks)"
        return why
    return f"exited with code {returncode}"


_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.kill()


@functools.cache
def _arm_atexit() -> None:
    """Register the leftover killer on the first spawn: importing this module has no side effect."""
    atexit.register(_kill_leftovers)


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
        label: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.label = label or " ".join(self.argv[:4])
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

    def wait_ready(self, progress: Callable[[float], None] | None = None) -> None:
        """Block until the server answers ``ready_url`` (``progress`` as :func:`wait_ready` calls
        it); kill its group and raise, with the end of its log, if it dies or times out."""
        try:
            wait_ready(self.ready_url, self.alive, self.startup_timeout_s, self.label, progress=progress)
        except (RuntimeError, TimeoutError) as exc:
            code = None if self.proc is None else self.proc.returncode
            self.kill()  # what is left of its group (a server's workers)
            why = f"{died_because(code)} before it was ready"
            if isinstance(exc, TimeoutError):
                why = f"not ready after {self.startup_timeout_s:g}s"
            if self.log_path is not None and self.log_path.is_file():
                why += "\n" + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
            raise LocalMemberError(f"{self.label}: {why}") from None

    def kill(self) -> None:
        """SIGKILL the whole process group now (idempotent)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
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
