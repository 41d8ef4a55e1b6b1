from __future__ import annotations

from collections.abc import Iterator

import pytest

from edgeroute.app import create_app
from router import load_settings
from loadtest.servers import serve_app


@pytest.fixture(scope="session")
def node_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An edge-only node on loopback (the real API, pipeline and edge model) for the load tools."""
    data = tmp_path_factory.mktemp("node-data")
    settings = load_settings(data_dir=data, edge={"n_ctx": 2048, "max_queue": 16}, cloud={"local_member": False})
    with serve_app(create_app(settings)) as base:
        yield base
