"""Child server processes: readiness, stop/kill of the whole process group, exit with the parent,
supervision (the node's local vLLM member and `cloud serve`'s supervisor), and vLLM's command line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

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
import cloud.member
from cloud.errors import VllmUnavailableError
from cloud.local import ServerProcess, free_port
from cloud.member.launcher import (
    Launch, check_cpu, check_exposure, cpu_flags, describe_cpu, pick_dtype, server_args, server_env,
)
from cloud.member.supervisor import Supervisor
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
    proc = ServerProcess(["sh", "-c", script], f"http://127.0.0.1:{port}/", log_path=tmp_path / "log",
                         startup_timeout_s=60)
    proc.spawn()
    try:
        proc.wait_ready()
        grandchild = int(pidfile.read_text())
        assert _alive(grandchild)
    finally:
        proc.stop(timeout_s=5)
    assert proc.proc is not None and proc.proc.returncode is not None
    assert _wait_gone(grandchild)


def test_a_member_exits_when_its_parent_dies(tmp_path: Path) -> None:
    """The lifeline of every rank and of the local member: no orphan survives its parent."""
    pidfile = tmp_path / "child.pid"
    # The child announces itself only once it watches its parent (the lifeline arms the watch
    # before it runs the module): killing the parent before that (a fixed sleep was the wait, and
    # the import took longer on a slow VM) left it watching its new parent, init, for ever.
    (tmp_path / "announce.py").write_text(
        "import os, sys, time\n"
        "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\ntime.sleep(300)\n"
    )
    middle = textwrap.dedent(f"""
        import os, subprocess, sys, time
        from cloud.member.process import LIFELINE
        subprocess.Popen([sys.executable, "-c", LIFELINE, str(os.getpid()), "announce", {str(pidfile)!r}],
                         env={{**os.environ, "PYTHONPATH": {str(tmp_path)!r}}})
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
    member = LocalMember(model="no-such-model", log_path=tmp_path / "bad.log")
    with pytest.raises(LocalMemberError, match="unknown model 'no-such-model'"):
        member.spawn()
    assert member.proc is None  # nothing was started


@pytest.mark.slow
async def test_open_pool_starts_supervises_and_stops_the_local_member(tmp_path: Path) -> None:
    """No member configured: the node's pool runs one local member, vLLM's server, restarts it
    when it is killed, and stops it (with its engine process) on exit."""
    events: list[PoolEvent] = []
    settings = PoolSettings(health_interval_s=0.5, cooldown_s=0.5)
    request = GenerationRequest(
        SamplingParams(max_tokens=3, temperature=0.0), messages=({"role": "user", "content": "Hi"},)
    )
    async with open_pool(settings, on_event=events.append, log_path=tmp_path / "local.log") as pool:
        local = pool.local_member
        assert local is not None and local.pid is not None
        assert "vllm.entrypoints.openai.api_server" in local.argv
        assert [(s.name, s.healthy) for s in pool.status()] == [("local", True)]
        assert (await collect(pool.stream(request))).text
        async with httpx.AsyncClient() as http:
            metrics = (await http.get(f"http://127.0.0.1:{local.port}/metrics", timeout=30)).text
        assert "vllm:num_requests_running" in metrics  # vLLM itself answers
        group = _group(local.pid)
        assert len(group) >= 2  # the API server and its engine core

        first_pid = local.pid
        os.kill(first_pid, signal.SIGKILL)
        deadline = time.monotonic() + 900
        served_again = False
        while time.monotonic() < deadline and not served_again:
            await asyncio.sleep(0.5)
            if local.pid != first_pid and local.alive() and pool.status()[0].healthy:
                with contextlib.suppress(PoolUnavailableError):  # readmission may need one more round
                    served_again = bool((await collect(pool.stream(request))).text)
        assert served_again and local.pid != first_pid
        assert all(_wait_gone(pid, 10) for pid in group)  # the killed server's engine went too
        last_group = _group(local.pid)
    assert all(_wait_gone(pid, 10) for pid in last_group)


def _group(pgid: int) -> list[int]:
    """The live processes of a process group."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(stat.parent.name))
    return out


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


def test_vllm_flags_mirror_the_member_settings() -> None:
    settings = MemberServerSettings(
        tensor_parallel=3, port=9000, host="0.0.0.0", api_key="k", max_num_seqs=16, vllm_args=("--seed", "1")
    )
    args = server_args(settings, Path("/m/smollm2-135m-instruct-fp32"), "cpu", "bfloat16")
    assert args == [
        "--model", "/m/smollm2-135m-instruct-fp32",
        "--served-model-name", "smollm2-135m-instruct",
        "--host", "0.0.0.0",
        "--port", "9000",
        "--tensor-parallel-size", "3",
        "--dtype", "bfloat16",
        "--max-model-len", "2048",
        "--generation-config", "vllm",
        "--disable-uvicorn-access-log",
        "--uvicorn-log-level", "warning",
        "--distributed-executor-backend", "mp",
        "--enforce-eager",
        "--max-num-seqs", "16",
        "--middleware", "edgeroute_member_guard.RequireKey",
        "--seed", "1",
    ]  # fmt: skip
    cuda = server_args(MemberServerSettings(kv_cache_gib=4), Path("/m"), "cuda", "auto")
    assert cuda[-2:] == ["--kv-cache-memory-bytes", "4G"] and "--distributed-executor-backend" not in cuda
    assert "--enforce-eager" not in cuda  # CUDA graphs and torch.compile stay on a GPU
    assert "--enforce-eager" not in server_args(MemberServerSettings(eager=False), Path("/m"), "cpu", "float32")
    env = server_env(settings, "cpu", {"PYTHONPATH": "/node", "VIRTUAL_ENV": "/node/.venv", "HOME": "/h"})
    assert Path(env.pop("EDGEROUTE_MEMBER_GUARD")) == Path(cloud.member.__file__).with_name("guard.py")
    assert env == {
        "HOME": "/h",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_API_KEY": "k",  # not on the command line, where every user of the host can read it
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    }
    one_rank = server_env(MemberServerSettings(kv_cache_gib=2), "cpu", {})
    assert one_rank["VLLM_CPU_KVCACHE_SPACE"] == "2" and "VLLM_CPU_OMP_THREADS_BIND" not in one_rank
    # One rank runs inside vLLM's engine core (no worker process polling beside it) ...
    assert one_rank["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    # ... ranks of a tensor-parallel member are processes, and an operator's choice is kept.
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env
    assert server_env(MemberServerSettings(), "cpu", {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"})[
        "VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    # Its threads: every core unless the member is given a share of them.
    assert "OMP_NUM_THREADS" not in one_rank
    assert server_env(MemberServerSettings(threads=1), "cpu", {"OMP_NUM_THREADS": "8"})["OMP_NUM_THREADS"] == "1"
    # ... and so do the ranks of a tensor-parallel member, each (unbound, they read it from the
    # environment: 3 ranks of every core's threads on 2 cores decoded 0.3 tokens/s).
    ranks = server_env(MemberServerSettings(tensor_parallel=3, threads=1), "cpu", {})
    assert ranks["OMP_NUM_THREADS"] == "1" and ranks["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    assert "VLLM_CPU_KVCACHE_SPACE" not in server_env(settings, "cuda", {})
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in server_env(MemberServerSettings(), "cuda", {})


def test_a_cpu_without_avx2_is_refused_with_the_reason() -> None:
    cpuinfo = "processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx\n"
    with pytest.raises(VllmUnavailableError, match="neither AVX-512 nor AVX2") as info:
        check_cpu("x86_64", cpu_flags(cpuinfo))
    assert info.value.code == "cpu_unsupported"
    (warning,) = check_cpu("x86_64", cpu_flags(cpuinfo.replace("avx\n", "avx avx2\n")))
    assert "AVX2 but not AVX-512" in warning
    assert check_cpu("x86_64", {"avx2", "avx512f"}) == ()
    assert check_cpu("aarch64", {"asimd"}) == ()


def test_auto_dtype_is_bfloat16_only_where_the_cpu_computes_it() -> None:
    avx2 = {"avx", "avx2", "fma"}
    avx512 = avx2 | {"avx512f", "avx512bw"}
    assert pick_dtype("auto", "cpu", avx2) == "float32"
    assert pick_dtype("auto", "cpu", avx512) == "float32"  # AVX-512 without its bf16 extension
    assert pick_dtype("auto", "cpu", avx512 | {"avx512_bf16"}) == "bfloat16"
    assert pick_dtype("auto", "cpu", avx512 | {"amx_bf16", "amx_tile"}) == "bfloat16"
    assert pick_dtype("auto", "cpu", set()) == "float32"  # no /proc/cpuinfo flags: the safe choice
    assert pick_dtype("auto", "cuda", avx2) == "auto"  # vLLM picks on a GPU
    assert pick_dtype("bfloat16", "cpu", avx2) == "bfloat16"  # an explicit choice is kept
    assert MemberServerSettings().dtype == "auto" and PoolSettings().local_dtype == "auto"
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx avx2 avx512f avx512_bf16\n"
    assert describe_cpu(cpuinfo, cpu_flags(cpuinfo)) == "AMD EPYC (avx2 avx512f avx512_bf16)"


def test_native_bf16_is_a_cpu_member_computing_bfloat16_on_its_own_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    import cloud.member.launcher as launcher
    from cloud import native_bf16

    bf16 = "model name\t: Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
    monkeypatch.setattr(launcher, "pick_device", lambda choice: "cpu")
    assert native_bf16("auto", bf16) is True
    assert native_bf16("bfloat16", bf16) is True
    assert native_bf16("float32", bf16) is False
    assert native_bf16("bfloat16", bf16.replace(" avx512_bf16", "")) is False  # emulated
    monkeypatch.setattr(launcher, "pick_device", lambda choice: "cuda")
    assert native_bf16("auto", bf16) is False  # a GPU member does not run on the CPU's cores


def test_a_member_reachable_beyond_loopback_without_a_key_is_warned_about() -> None:
    for quiet in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert check_exposure(MemberServerSettings(host=quiet)) == ()
    assert check_exposure(MemberServerSettings(host="0.0.0.0", api_key="k")) == ()
    for exposed in ("0.0.0.0", "::", "10.1.2.3", "gpu-host"):
        (warning,) = check_exposure(MemberServerSettings(host=exposed))
        assert warning.startswith(f"binding {exposed} beyond loopback with no API key")


_HEALTH_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_the_supervisor_restarts_a_dead_server_and_stops_it_cleanly() -> None:
    """`cloud serve`'s supervisor over a stand-in server (vLLM's place is taken by a tiny HTTP
    server with /health): a SIGKILLed server comes back on the same port, and stop() leaves no process."""
    port = free_port()
    settings = MemberServerSettings(port=port, health_interval_s=0.2, startup_timeout_s=30)
    start = Launch([sys.executable, "-c", _HEALTH_SERVER, str(port)], dict(os.environ), "cpu", f"http://127.0.0.1:{port}")
    said: list[str] = []
    supervisor = Supervisor(settings, start, say=said.append)
    runner = threading.Thread(target=supervisor.serve, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while not any(line.startswith("serving ") for line in said):
            assert time.monotonic() < deadline and runner.is_alive(), said
            time.sleep(0.05)
        assert supervisor.server is not None and supervisor.server.pid is not None
        first = supervisor.server.pid
        os.kill(first, signal.SIGKILL)
        while supervisor.restarts < 1:
            assert time.monotonic() < deadline + 30, said
            time.sleep(0.05)
        assert "vLLM stopped serving (killed by SIGKILL); restarting in 1s" in said
        assert re.fullmatch(r"serving again \(ready in \d+s, restart 1\)", said[-1])
        second = supervisor.server.pid
        assert second != first and _alive(second)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    finally:
        supervisor.stop(timeout_s=5)
        runner.join(10)
    assert not runner.is_alive()
    assert _wait_gone(second, 10)


def test_the_local_member_takes_the_threads_it_is_given() -> None:
    assert LocalMember(threads=1).member_settings.threads == 1
    assert LocalMember().member_settings.threads is None  # every core
    assert PoolSettings(local_threads=3).local_threads == 3
    with pytest.raises(ValueError):
        PoolSettings(local_threads=0)
