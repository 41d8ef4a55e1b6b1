"""What the repository holds: no path of one machine in any tracked file, no judged data or data-making
script inside the installed packages."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "edge", "cloud", "router", "dashboard", "loadtest", "edgeroute")

# A home, a scratch or a mount folder of some machine, written as an absolute path. System paths a
# program may rely on (/usr/bin/chromium, /sys/devices/..., /dev/null) are not a machine's.
MACHINE_PATH = re.compile(
    r"(?<![\w.~/])(?:/(?:work|root|home|Users|tmp|mnt|media|scratch|private|var/tmp)/"
    r"|[A-Za-z]:\\(?:Users|Documents and Settings)\\)"
)


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout: {exc}")
    return [REPO / name for name in out.stdout.decode().split("\0") if name]


def machine_paths(text: str) -> list[str]:
    return [line.strip()[:120] for line in text.splitlines() if MACHINE_PATH.search(line)]


def test_the_pattern_finds_machine_paths_and_leaves_system_and_relative_ones() -> None:
    # Built from parts, so that this file holds no such path itself.
    def at(*parts: str) -> str:
        return "/" + "/".join(parts)

    found = [
        at("work", "judging3", "shard_S.jsonl"), f'Path("{at("tmp", "v4p1")}")', f"--data-dir {at('home', 'ann', 'd')}",
        f"`{at('Users', 'bo', 'x')}`", f"open('{at('root', '.cache', 'm')}')",
        "C:" + "\\".join(["", "Users", "ann", "model.gguf"]), f"src = {at('mnt', 'data', 'x')}",
        f"OUT=${{OUT:-{at('tmp', 'side')}}}",
    ]
    kept = ["/usr/bin/chromium", "/sys/devices/system/cpu", "/dev/null", "~/.cache/edgeroute/models",
            "https://example.com" + at("home", "index.html"), "data/judged/README.md", "bench/data/ood_pairs.jsonl",
            "${TMPDIR}/x", "../shared/data/qqp_pairs.jsonl"]
    assert [s for s in found if not machine_paths(s)] == []
    assert [s for s in kept if machine_paths(s)] == []


def test_no_tracked_file_names_an_absolute_machine_path() -> None:
    offenders = {}
    for path in tracked_files():
        if not path.is_file():
            continue  # deleted in the work tree
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary: the ONNX model, the index
        lines = machine_paths(data.decode("utf-8", errors="replace"))
        if lines:
            offenders[str(path.relative_to(REPO))] = lines[:3]
    assert offenders == {}


def test_the_installed_packages_hold_no_judged_data_or_data_making_script() -> None:
    names = [p.relative_to(REPO).as_posix() for p in tracked_files()]
    inside = [n for n in names if n.split("/")[0] in PACKAGES]
    judged = [n for n in inside if "/judged/" in n or re.search(r"(READER|WRITER)_(PROMPT|BRIEF)", n)]
    assert judged == []
    assert "data/judged/judged.jsonl" in names  # the judged set lives in the repository's data/
