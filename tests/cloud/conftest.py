"""Servers shared by the cloud tests: started once per session, killed at teardown no matter what."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cloud_servers import llama_server, running, vllm_member

from cloud.local import LocalMember, ServerProcess


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("member-logs")


@pytest.fixture(scope="session")
def member(logs: Path) -> Iterator[LocalMember]:
    """One vLLM member for the whole session (1 rank, the edge model's twin in float32): it takes
    minutes to start on a CPU, so every test that needs one shares it."""
    port = os.environ.get("EDGEROUTE_TEST_VLLM_PORT")
    if port:  # a member already running (`edgeroute cloud serve --port N --dtype float32 --api-key K`)
        running = LocalMember(name="vllm", port=int(port))
        running.api_key = os.environ.get("EDGEROUTE_MEMBER_API_KEY", "")
        yield running
        return
    with vllm_member(logs) as m:
        yield m


@pytest.fixture(scope="session")
def llama(logs: Path) -> Iterator[ServerProcess]:
    """llama.cpp's server on the edge GGUF: a second, independent OpenAI-compatible implementation."""
    with running(llama_server(logs)) as proc:
        yield proc
