"""Child server processes: readiness, stop/kill of the whole process group, exit with the parent,
supervision, and the `cloud serve` command line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from cloud import (
    LocalMember,
    LocalMemberError,
    MemberServerSettings,
    MemberSettings,
    PoolEvent,
    PoolSettings,
    PoolUnavailableError,
    open_pool,
)
from cloud.cli import cloud_app
from cloud.local import ServerProcess
from cloud.member import vllm_command
from cloud.member.ranks import free_port
from models import GenerationRequest, SamplingParams, collect


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def _wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_kill_takes_the_whole_process_group(tmp_path: Path) -> None:
    port = free_port()
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 300 & echo $! > {pidfile}; exec {sys.executable} -m http.server {port} --bind 127.0.0.1"
    proc = ServerProcess(["sh", "-c", script], f"http://127.0.0.1:{port}/", log_path=tmp_path / "log")
    proc.spawn()
    try:
        proc.wait_ready(60)
        grandchild = int(pidfile.read_text())
        assert _alive(grandchild)
    finally:
        proc.stop(timeout_s=5)
    assert proc.proc is not None and proc.proc.returncode is not None
    assert _wait_gone(grandchild)


def test_a_member_exits_when_its_parent_dies(tmp_path: Path) -> None:
    """The lifeline of every rank and of the local member: no orphan survives its parent."""
    pidfile = tmp_path / "child.pid"
    # The child announces itself only once it watches its parent: killing the parent before
    # that (a fixed sleep was the wait, and the import took longer on a slow VM) left it
    # watching its new parent, init, for ever.
    child_code = (
        "import os, time\nfrom cloud.member.ranks import exit_with_parent\n"
        "exit_with_parent(os.getppid())\n"
        f"open({str(pidfile) + '.tmp'!r}, 'w').write(str(os.getpid()))\n"
        f"os.replace({str(pidfile) + '.tmp'!r}, {str(pidfile)!r})\ntime.sleep(300)"
    )
    middle = textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {child_code!r}])
        time.sleep(300)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", middle], cwd=Path(__file__).resolve().parents[2], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        child = int(pidfile.read_text())
        assert _alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _wait_gone(child, 30)
    finally:
        if _alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_member_that_cannot_start_reports_why(tmp_path: Path) -> None:
    member = LocalMember(model="no-such-model", log_path=tmp_path / "bad.log", startup_timeout_s=120)
    member.spawn()
    with pytest.raises(LocalMemberError, match="exited with code 2 before it was ready") as info:
        member.wait_ready()
    assert "unknown model 'no-such-model'" in info.value.message
    member.kill()


@pytest.mark.slow
async def test_open_pool_starts_supervises_and_stops_the_local_member(tmp_path: Path) -> None:
    """No member configured: the node's pool runs one local member (in the dtype asked for),
    restarts it when it dies, and stops it on exit."""
    events: list[PoolEvent] = []
    settings = PoolSettings(
        health_interval_s=0.5, cooldown_s=0.5, local_startup_timeout_s=600, local_dtype="float32"
    )
    request = GenerationRequest(
        SamplingParams(max_tokens=3, temperature=0.0), messages=({"role": "user", "content": "Hi"},)
    )
    async with open_pool(settings, on_event=events.append, log_path=tmp_path / "local.log") as pool:
        local = pool.local_member
        assert local is not None and local.pid is not None
        assert [(s.name, s.healthy) for s in pool.status()] == [("local", True)]
        assert (await collect(pool.stream(request))).text
        async with httpx.AsyncClient() as http:
            health = (await http.get(f"http://127.0.0.1:{local.port}/health", timeout=30)).json()
        assert health["dtype"] == "float32"  # not the default bfloat16: local_dtype reached the member

        first_pid = local.pid
        os.kill(first_pid, signal.SIGKILL)
        deadline = time.monotonic() + 600
        served_again = False
        while time.monotonic() < deadline and not served_again:
            await asyncio.sleep(0.3)
            if local.pid != first_pid and local.alive() and pool.status()[0].healthy:
                with contextlib.suppress(PoolUnavailableError):  # readmission may need one more round
                    served_again = bool((await collect(pool.stream(request))).text)
        assert served_again and local.pid != first_pid
        last_pid = local.pid
    assert last_pid is not None and _wait_gone(last_pid, 5)
    assert not _alive(first_pid)


def test_no_local_member_when_turned_off_or_members_are_configured() -> None:
    async def members(settings: PoolSettings) -> list[str]:
        async with open_pool(settings) as pool:
            assert pool.local_member is None
            return [s.name for s in pool.status()]

    off = PoolSettings(local_member=False, health_interval_s=0)
    configured = PoolSettings(
        members=[MemberSettings(name="gpu0", base_url=f"http://127.0.0.1:{free_port()}/v1", model="m")],
        health_interval_s=0,
    )
    assert asyncio.run(members(off)) == []
    assert asyncio.run(members(configured)) == ["gpu0"]


def test_vllm_engine_says_clearly_when_vllm_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(cloud_app, ["serve", "--engine", "vllm", "--tensor-parallel", "3"])
    assert result.exit_code == 2
    assert "vLLM is not installed here" in result.output


def test_vllm_command_mirrors_the_member_flags() -> None:
    settings = MemberServerSettings(tensor_parallel=3, port=9000, host="0.0.0.0", api_key="k")
    assert vllm_command(settings, Path("/m/smollm2-135m-instruct-fp32")) == [
        "vllm",
        "serve",
        "/m/smollm2-135m-instruct-fp32",
        "--served-model-name",
        "smollm2-135m-instruct",
        "--tensor-parallel-size",
        "3",
        "--host",
        "0.0.0.0",
        "--port",
        "9000",
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",
        "--api-key",
        "k",
    ]
