"""Fixtures of the dashboard tests: a fake node's app in-process, and headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient

from browserkit import CHROMIUM_ARGS, Tab, ensure_chromium
from dashfakes import FakeCache, FakeEdge, FakeEntry, FakeMember, FakeNode, FakePool, fake_app, make_telemetry


@pytest.fixture
def node(tmp_path: Path) -> FakeNode:
    pool = FakePool(
        [
            FakeMember("gpu-a", "http://127.0.0.1:9001/v1"),
            FakeMember("gpu-b", "http://127.0.0.1:9002/v1", outstanding=3, running=2, waiting=1),
        ]
    )
    cache = FakeCache(
        [
            FakeEntry(1, "acme", "auto", "What is the capital of France?", "Paris.", tier="edge"),
            FakeEntry(
                2, "acme", "auto", "Explain <b>TCP</b> slow start", "It grows the window...", tier="cloud"
            ),
            FakeEntry(3, "globex", "auto", "What is the capital of Spain?", "Madrid.", tier="edge"),
        ],
        evictions=4,
    )
    return FakeNode(make_telemetry(tmp_path / "data", bus_interval_ms=50), FakeEdge(), pool, cache)


@pytest.fixture
def client(node: FakeNode) -> Iterator[TestClient[Litestar]]:
    with TestClient(fake_app(node)) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per browser test module; each test gets its own context (``tab``).

    Module scope on purpose: Playwright's sync API keeps an event loop running in the main thread
    while it is open, and pytest-asyncio cannot start a test's loop while that one runs, so it
    must be closed before the async tests of later modules.
    """
    from playwright.sync_api import sync_playwright

    executable = ensure_chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    page = Tab(browser)
    yield page
    page.close()
