"""The layers as a fresh interpreter sees them: the lower packages load nothing from above."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("package", ["models", "edge", "cloud"])
def test_lower_package_loads_nothing_from_above(package: str) -> None:
    """Nor Litestar: the pool's client and the engines run without the servers' side."""
    code = (
        f"import json, sys; import {package}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('router', 'dashboard', 'litestar', 'loadtest', 'edgeroute'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("module", ["router", "dashboard", "edgeroute.app"])
def test_the_request_path_loads_no_load_tool(module: str) -> None:
    """The load generator and the fault run are the command line's, never the serving app's."""
    code = (
        f"import json, sys; import {module}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'loadtest')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
