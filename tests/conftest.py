"""Fixtures shared by every test: an isolated data directory, offline hubs, the bundled models, and
the one vLLM member of the session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from cloud.local import LocalMember

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


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The logs of the session's servers (vLLM members, llama.cpp's server)."""
    return tmp_path_factory.mktemp("member-logs")


@pytest.fixture(scope="session")
def member(logs: Path) -> Iterator[LocalMember]:
    """One vLLM member for the whole session (1 rank, the edge model's twin in float32): it takes
    tens of seconds to start on a CPU, so every test that needs one (the cloud tests, the fleet's
    pool) shares it."""
    from cloud.local import LocalMember
    from tests.cloud.cloud_servers import vllm_member

    port = os.environ.get("EDGEROUTE_TEST_VLLM_PORT")
    if port:  # a member already running (`edgeroute cloud serve --port N --dtype float32 --api-key K`)
        running = LocalMember(name="vllm", port=int(port))
        running.api_key = os.environ.get("EDGEROUTE_MEMBER_API_KEY", "")
        yield running
        return
    with vllm_member(logs) as m:
        yield m
