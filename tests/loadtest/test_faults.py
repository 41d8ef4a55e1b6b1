"""`edgeroute bench faults` as an operator runs it: a short run (the 1,000-stream run is the
command's, reported in the README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.servers import run_edgeroute

pytestmark = pytest.mark.slow


def test_a_short_fault_run_passes(tmp_path: Path) -> None:
    out = run_edgeroute("bench", "faults", "--requests", "40", "--concurrency", "4", "--data-dir", str(tmp_path / "d"),
                        timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "complete streams:   40 (100.0%)" in out.stdout
    assert "[DONE] per stream:  {1: 40}" in out.stdout
    assert "over max_tokens:    0" in out.stdout
    assert out.stdout.rstrip().endswith("PASS")
