"""Debian's Prometheus for the fleet tests: found as `make prometheus` installs it, else installed.

As with Chromium (browserkit.py), a missing Prometheus fails the fleet tests with what apt-get
said; ``EDGEROUTE_SKIP_PROMETHEUS=1`` is the one explicit way to skip them instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from loadtest.fleet import prometheus_binary

SKIP_ENV = "EDGEROUTE_SKIP_PROMETHEUS"
NO_APT_ENV = "EDGEROUTE_NO_APT"


def _install() -> str:
    if os.environ.get(NO_APT_ENV):
        return f"{NO_APT_ENV} is set: apt-get was not run"
    if shutil.which("apt-get") is None:
        return "apt-get is not on PATH"
    if os.geteuid() != 0:
        return "not root, so apt-get was not run: `make prometheus` installs it with sudo"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    transcript = []
    for argv in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "prometheus"],
    ):
        try:
            done = subprocess.run(argv, check=False, timeout=900, capture_output=True, text=True, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            transcript.append(f"$ {' '.join(argv)}\n{type(exc).__name__}: {exc}")
            break
        transcript.append(f"$ {' '.join(argv)}  (exit {done.returncode})\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            break
    return "\n".join(transcript)


def ensure_prometheus() -> Path:
    """The prometheus binary (promtool next to it), installed when missing."""
    found = prometheus_binary()
    if found is not None:
        return found
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"prometheus is not installed and {SKIP_ENV}=1 opts out of the fleet tests")
    transcript = _install()
    found = prometheus_binary()
    if found is not None:
        return found
    pytest.fail(
        "the fleet tests need Debian's prometheus (`make prometheus`, or `apt-get install prometheus`); "
        f"set {SKIP_ENV}=1 to skip them on purpose. Installing it failed:\n" + transcript[-6000:],
        pytrace=False,
    )


def promtool() -> Path:
    binary = ensure_prometheus()
    tool = shutil.which("promtool") or str(binary.with_name("promtool"))
    return Path(tool)
