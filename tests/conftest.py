"""Fixtures shared by every test: an isolated data directory, offline hubs, the bundled models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
QQP = SHARED / "data" / "qqp_pairs.jsonl"


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data directory; nothing touches the operator's."""
    data = tmp_path / "data"
    monkeypatch.setenv("EDGEROUTE_DATA_DIR", str(data))
    return data
