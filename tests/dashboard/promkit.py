"""Debian's Prometheus for the fleet tests: found as `make prometheus` installs it, else installed.

As with Chromium (browserkit.py), a missing Prometheus fails the fleet tests with what apt-get
said; ``EDGEROUTE_SKIP_PROMETHEUS=1`` is the one explicit way to skip them instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from loadtest.fleet import prometheus_binary
from browserkit import apt_install

SKIP_ENV = "EDGEROUTE_SKIP_PROMETHEUS"


def ensure_prometheus() -> Path:
    """The prometheus binary (promtool next to it), installed when missing."""
    found = prometheus_binary()
    if found is not None:
        return found
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"prometheus is not installed and {SKIP_ENV}=1 opts out of the fleet tests")
    transcript = apt_install("prometheus", "prometheus", recommends=False)
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
