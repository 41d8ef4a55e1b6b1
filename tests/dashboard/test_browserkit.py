"""A missing Chromium fails the browser tests with apt-get's output, unless explicitly opted out."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

import browserkit

APT_ERROR = "E: Unable to locate package chromium"


@pytest.fixture
def no_chromium(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    """No chromium anywhere, root, apt-get present but failing; returns the commands run."""
    ran: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        if argv[1] == "update":
            return subprocess.CompletedProcess(argv, 0, "Reading package lists...\n", "")
        return subprocess.CompletedProcess(argv, 100, "Reading package lists...\n", f"{APT_ERROR}\n")

    monkeypatch.setattr(browserkit, "CHROMIUM_FALLBACK", tmp_path / "chromium")
    monkeypatch.setattr(
        browserkit.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None
    )
    monkeypatch.setattr(browserkit.os, "geteuid", lambda: 0)
    monkeypatch.setattr(browserkit.subprocess, "run", fake_run)
    monkeypatch.delenv(browserkit.SKIP_ENV, raising=False)
    monkeypatch.delenv(browserkit.NO_APT_ENV, raising=False)
    return ran


def test_missing_chromium_fails_with_the_apt_output(no_chromium: list[list[str]]) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        browserkit.ensure_chromium()
    message = str(failed.value)
    assert no_chromium == [["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]]
    assert "$ apt-get install -y chromium  (exit 100)" in message
    assert APT_ERROR in message
    assert "set EDGEROUTE_SKIP_BROWSER=1 to skip them on purpose" in message


def test_the_opt_out_skips_without_trying_apt(
    no_chromium: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(browserkit.SKIP_ENV, "1")
    with pytest.raises(pytest.skip.Exception) as skipped:
        browserkit.ensure_chromium()
    reason = "chromium is not installed and EDGEROUTE_SKIP_BROWSER=1 opts out of the browser tests"
    assert str(skipped.value) == reason
    assert no_chromium == []


def test_without_root_the_failure_says_why(
    no_chromium: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browserkit.os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.fail.Exception) as failed:
        browserkit.ensure_chromium()
    why = "not root, so apt-get was not run: `make browser` installs it with sudo"
    assert str(failed.value).endswith(why)
    assert no_chromium == []


def test_found_like_the_makefile_finds_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on_path = "/opt/bin/chromium"
    monkeypatch.setattr(browserkit.shutil, "which", lambda name: on_path if name == "chromium" else None)
    assert browserkit.ensure_chromium() == Path(on_path)
    fallback = tmp_path / "chromium"
    fallback.write_text("#!/bin/sh\n")
    fallback.chmod(0o755)
    monkeypatch.setattr(browserkit.shutil, "which", lambda name: None)
    monkeypatch.setattr(browserkit, "CHROMIUM_FALLBACK", fallback)
    assert browserkit.ensure_chromium() == fallback
