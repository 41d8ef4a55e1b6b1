from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edgeroute.app import create_app
from router import load_settings
from loadtest.servers import serve_app


@pytest.fixture(scope="session")
def node_app(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    data = tmp_path_factory.mktemp("node-data")
    # An edge-only node: these tests pin the foundation's behaviour (the hybrid tests add members).
    settings = load_settings(data_dir=data, edge={"n_ctx": 2048, "max_queue": 16}, cloud={"local_member": False})
    return create_app(settings)


@pytest.fixture(scope="session")
def node_url(node_app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serve_app(node_app) as base:
        yield base


@pytest.fixture(scope="session")
def data_path(node_app) -> Path:  # type: ignore[no-untyped-def]
    return Path(node_app.state.node.settings.data_dir)


@pytest.fixture(scope="session")
def keyed_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An edge-only node with one tenant key (``key-a``), cache off: where the APIs' keys are tested."""
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("keyed"), cloud={"local_member": False}, cache={"enabled": False},
        server={"api_keys": {"key-a": "team-a"}},
    )
    with serve_app(create_app(settings)) as base:
        yield base
