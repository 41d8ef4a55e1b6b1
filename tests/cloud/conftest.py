"""Servers shared by the cloud tests: started once per session, killed at teardown no matter what
(the vLLM ``member`` and ``logs`` are the whole suite's, in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cloud_servers import llama_server, running

from cloud.local import ServerProcess


@pytest.fixture(scope="session")
def llama(logs: Path) -> Iterator[ServerProcess]:
    """llama.cpp's server on the edge GGUF: a second, independent OpenAI-compatible implementation."""
    with running(llama_server(logs)) as proc:
        yield proc
