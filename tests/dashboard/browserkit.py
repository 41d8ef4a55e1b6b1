"""Headless Chromium for the browser tests: finding (or installing) Debian's build, and a tab.

A missing browser fails the browser tests, showing what apt-get said, so CI cannot pass with
none of them run; ``EDGEROUTE_SKIP_BROWSER=1`` is the one explicit way to skip them instead.
Chromium is looked up as the Makefile's ``browser`` target does: ``chromium`` on PATH, else
``/usr/bin/chromium``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FALLBACK = Path("/usr/bin/chromium")
SKIP_ENV = "EDGEROUTE_SKIP_BROWSER"
NO_APT_ENV = "EDGEROUTE_NO_APT"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
APT_OUTPUT_CHARS = 6000  # the end of apt-get's transcript is where its error is


def find_chromium() -> Path | None:
    found = shutil.which("chromium")
    if found:
        return Path(found)
    return CHROMIUM_FALLBACK if os.access(CHROMIUM_FALLBACK, os.X_OK) else None


def apt_install(package: str, make_target: str, *, recommends: bool = True) -> str:
    """Try ``apt-get install PACKAGE``; what happened, as a transcript for the failure message."""
    if os.environ.get(NO_APT_ENV):
        return f"{NO_APT_ENV} is set: apt-get was not run"
    if shutil.which("apt-get") is None:
        return "apt-get is not on PATH"
    if os.geteuid() != 0:
        return f"not root, so apt-get was not run: `make {make_target}` installs it with sudo"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", *([] if recommends else ["--no-install-recommends"]), package]
    transcript: list[str] = []
    for argv in (["apt-get", "update"], install):
        command = " ".join(argv)
        try:
            done = subprocess.run(argv, check=False, timeout=900, capture_output=True, text=True, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            transcript.append(f"$ {command}\n{type(exc).__name__}: {exc}")
            break
        transcript.append(f"$ {command}  (exit {done.returncode})\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            break
    return "\n".join(transcript)


def install_chromium() -> str:
    return apt_install("chromium", "browser")


def ensure_chromium() -> Path:
    """Debian's chromium, installed when missing; fails (or, opted out, skips) without it."""
    found = find_chromium()
    if found is not None:
        return found
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"chromium is not installed and {SKIP_ENV}=1 opts out of the browser tests")
    transcript = install_chromium()
    found = find_chromium()
    if found is not None:
        return found
    pytest.fail(
        "the browser tests need Debian's chromium (`make browser`, or `apt-get install chromium`); "
        f"set {SKIP_ENV}=1 to skip them on purpose. Installing it failed:\n"
        + transcript[-APT_OUTPUT_CHARS:],
        pytrace=False,
    )


class Tab:
    """A browser tab that records console errors, page errors and dialogs."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1360, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def on_dialog(d: Any) -> None:
            self.dialogs.append(f"{d.type}: {d.message}")
            d.accept()

        self.page.on("dialog", on_dialog)

    def wait_live(self) -> Any:
        # The SSE stream is open once app.js has seen htmx:sseOpen.
        self.page.wait_for_selector('#live-status[data-state="live"]', timeout=15_000)
        return self.page

    def open(self, url: str) -> Any:
        self.page.goto(url)
        return self.wait_live()

    def shot(self, name: str, full_page: bool = False) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)

    def close(self) -> None:
        self.context.close()
