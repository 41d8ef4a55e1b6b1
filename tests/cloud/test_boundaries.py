"""Foreign exceptions become the cloud's own errors at the boundary, and importing ``cloud`` has no
side effect (no atexit hook, no `models prepare` step) until asked."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cloud.config import MemberServerSettings
from cloud.errors import CloudError, ProcessGroupError, VllmUnavailableError, WeightsError
from cloud.member.ranks import free_port, init_group
from cloud.member.vllm import exec_vllm
from cloud.member.weights import ensure_weights
from models import EDGE_DEFAULT, EdgerouteError

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_cloud_registers_nothing() -> None:
    out = _python(
        """
        import sys
        import cloud, cloud.local
        p = sys.modules["models.prepare"]  # the module (``models.prepare`` is also its function)
        print(cloud.local._atexit_armed, len(p._EXTRA_STEPS))
        cloud.register_prepare_steps()
        cloud.register_prepare_steps()  # idempotent
        print(len(p._EXTRA_STEPS), p._EXTRA_STEPS[0].__name__)
        proc = cloud.local.ServerProcess(["true"], "http://127.0.0.1:1/")
        proc.spawn()
        proc.kill()
        print(cloud.local._atexit_armed)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n") == ["False 0", "1 _prepare_twin", "True", ""]


def test_a_failed_rendezvous_is_a_process_group_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # monkeypatch records these so whatever init_group writes into os.environ is undone afterwards.
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.setenv(name, "0")
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    with socket.socket() as taken:  # rank 0's store cannot listen on a port already bound
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        where = f"rank 0 of 2 could not join the gloo process group at 127.0.0.1:{port}"
        with pytest.raises(ProcessGroupError, match=where) as info:
            init_group(0, 2, "cpu", timeout_s=5)
    assert info.value.code == "process_group_failed"
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_vllm_that_cannot_execute_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "vllm"
    fake.write_text("#!/nonexistent/interpreter\n")  # on PATH and executable, but exec fails
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VllmUnavailableError, match=f"could not execute {fake}") as info:
        exec_vllm(MemberServerSettings(), tmp_path)
    assert info.value.code == "vllm_exec_failed"
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_the_cli_prints_the_vllm_exec_failure_without_a_traceback(tmp_path: Path) -> None:
    fake = tmp_path / "vllm"
    fake.write_text("#!/nonexistent/interpreter\n")
    fake.chmod(0o755)
    out = subprocess.run(
        [sys.executable, "-m", "cloud.member", "--engine", "vllm", "--model", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: could not execute {fake}: ")
    assert "Traceback" not in out.stderr


def test_an_unwritable_models_dir_is_a_weights_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    models_dir = blocker / "models"  # under a regular file: no directory can be made there (even as root)
    with pytest.raises(WeightsError, match="cannot write the fp32 twin") as info:
        ensure_weights(EDGE_DEFAULT, models_dir)
    assert info.value.code == "models_dir_unwritable"
    assert isinstance(info.value.__cause__, NotADirectoryError)
    assert isinstance(info.value, CloudError) and isinstance(info.value, EdgerouteError)
