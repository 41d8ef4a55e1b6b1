"""Servers shared by the cloud tests: started once per session, killed at teardown no matter what."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cloud_servers import llama_server, running, torch_member

from cloud.local import LocalMember, ServerProcess


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("member-logs")


@pytest.fixture(scope="session")
def member(logs: Path) -> Iterator[LocalMember]:
    """One 1-rank member server (the fp32 twin of the edge model, loaded in bfloat16)."""
    with torch_member(logs) as m:
        yield m


@pytest.fixture(scope="session")
def llama(logs: Path) -> Iterator[ServerProcess]:
    """llama.cpp's server on the edge GGUF: a second, independent OpenAI-compatible implementation."""
    with running(llama_server(logs)) as proc:
        yield proc
