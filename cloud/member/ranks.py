"""Processes of a tensor-parallel member: rank 0 (the server) spawns and watches ranks 1..N-1.

Nothing may hang forever: a rank whose parent vanishes exits at once (the parent is polled), rank
0 exits when any other rank exits (its children are polled), and a rank that stops answering
makes the next collective fail after ``collective_timeout_s``.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..config import MemberServerSettings
from ..errors import ProcessGroupError

log = logging.getLogger(__name__)

SETTINGS_ENV = "EDGEROUTE_MEMBER_SETTINGS"
WEIGHTS_ENV = "EDGEROUTE_MEMBER_WEIGHTS"
_POLL_S = 0.25


def project_root() -> Path:
    """The directory holding the ``cloud`` package, for child processes' ``PYTHONPATH``."""
    return Path(__file__).resolve().parents[2]


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    root = str(project_root())
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def exit_with_parent(parent_pid: int) -> None:
    """Exit as soon as ``parent_pid`` is no longer this process's parent (it died, we were re-parented)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_POLL_S)
        os._exit(1)  # noqa: SLF001 - nothing may linger after the parent is gone

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def init_group(rank: int, world_size: int, device_type: str, timeout_s: float) -> None:
    """Join the process group (``MASTER_ADDR``/``MASTER_PORT`` in the environment).

    Raises :class:`ProcessGroupError` when the rendezvous fails (port taken, a rank never came,
    backend unavailable), instead of torch's own RuntimeError/ValueError and their traceback.
    """
    import torch.distributed as dist

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size)})
    backend = "nccl" if device_type == "cuda" else "gloo"
    try:
        dist.init_process_group(
            backend=backend,
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except (RuntimeError, ValueError, OSError) as exc:  # DistStoreError/DistNetworkError are RuntimeErrors
        where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
        raise ProcessGroupError(
            f"rank {rank} of {world_size} could not join the {backend} process group at {where}: {exc}",
            code="process_group_failed",
        ) from exc


class Ranks:
    """Rank 0's handle on the other ranks."""

    def __init__(self, settings: MemberServerSettings, weights: Path) -> None:
        self.settings = settings
        self.weights = weights
        self.procs: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()

    def spawn(self) -> None:
        """Start ranks 1..N-1 and watch them; rank 0 then joins the group with :func:`init_group`."""
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(free_port())
        for rank in range(1, self.settings.tensor_parallel):
            env = child_env(
                {
                    SETTINGS_ENV: self.settings.model_copy(
                        update={"parent_pid": os.getpid()}
                    ).model_dump_json(),
                    WEIGHTS_ENV: str(self.weights),
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(self.settings.tensor_parallel),
                }
            )
            try:
                proc = subprocess.Popen([sys.executable, "-m", "cloud.member.worker"], env=env)
            except OSError as exc:
                self.kill()
                raise ProcessGroupError(f"could not start rank {rank}: {exc}") from exc
            self.procs.append(proc)
        threading.Thread(target=self._watch, name="rank-watch", daemon=True).start()

    def _watch(self) -> None:
        while not self._stopping.is_set():
            for rank, proc in enumerate(self.procs, start=1):
                code = proc.poll()
                if code is not None and not self._stopping.is_set():
                    self.fatal(f"rank {rank} exited with code {code}")
                    return
            time.sleep(_POLL_S)

    def fatal(self, reason: str) -> None:
        """The group is broken for good: kill every rank and leave (a supervisor restarts the member)."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        log.error("tensor-parallel member going down: %s", reason)
        self.kill()
        # A moment for in-flight responses to send their error events, then exit whatever the state.
        threading.Timer(0.5, os._exit, (1,)).start()

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)

    def quiesce(self) -> None:
        """A planned shutdown begins: ranks exiting from now on are expected."""
        self._stopping.set()

    def stop(self, timeout: float = 10.0) -> None:
        """After the shutdown command was broadcast: let the ranks leave, then make sure they did."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
