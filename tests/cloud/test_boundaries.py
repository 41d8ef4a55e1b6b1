"""Foreign exceptions become the cloud's own errors at the boundary, and importing ``cloud`` has no
side effect (no atexit hook, no `models prepare` step) until asked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cloud.errors import CloudError, VllmUnavailableError, WeightsError
from cloud.member.launcher import vllm_python
from cloud.twin import ensure_twin
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
        import cloud, cloud.local, cloud.member.process
        p = sys.modules["models.prepare"]  # the module (``models.prepare`` is also its function)
        print(bool(cloud.member.process._arm_atexit.cache_info().currsize), len(p._EXTRA_STEPS))
        cloud.register_prepare_steps()
        cloud.register_prepare_steps()  # idempotent
        print(len(p._EXTRA_STEPS), p._EXTRA_STEPS[0].__name__)
        proc = cloud.local.ServerProcess(["true"], "http://127.0.0.1:1/")
        proc.spawn()
        proc.kill()
        print(bool(cloud.member.process._arm_atexit.cache_info().currsize))
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n") == ["False 0", "1 prepare_twin", "True", ""]


def test_a_missing_vllm_environment_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    with pytest.raises(VllmUnavailableError, match="vLLM's environment is not installed") as info:
        vllm_python(missing)
    assert info.value.code == "vllm_not_installed" and info.value.param == "vllm_python"
    assert str(missing) in info.value.message and "make vllm" in info.value.message


def test_the_cli_says_why_vllm_cannot_start_without_a_traceback(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cloud.member", "--vllm-python", str(tmp_path / "python"), "--device", "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: vLLM's environment is not installed ({tmp_path / 'python'} is missing)")
    assert "Traceback" not in out.stderr


def test_an_unwritable_models_dir_is_a_weights_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    models_dir = blocker / "models"  # under a regular file: no directory can be made there (even as root)
    with pytest.raises(WeightsError, match="cannot write the fp32 twin") as info:
        ensure_twin(EDGE_DEFAULT, models_dir)
    assert info.value.code == "models_dir_unwritable"
    assert isinstance(info.value.__cause__, NotADirectoryError)
    assert isinstance(info.value, CloudError) and isinstance(info.value, EdgerouteError)
