"""The dashboard in headless Chromium against a running node with the real edge model.

Requests go through the official ``openai`` SDK; the pages must update live (SSE) without a
reload. The pool and cache panels read in-memory fakes until the cloud pool and the edge cache
are merged (see dashnode.py); the lead extends these checks to the real ones after integration.
Screenshots of every page are saved under artifacts/screenshots/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from playwright.sync_api import expect

from tests.cloud.cloud_servers import llama_server, llama_settings, running
from dashnode import create_node_app
from dashserver import serve
from router import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
LIVE_MS = 2000  # the acceptance bound: updates within 2 s, no reload
EVIL = "<script>window.__pwned = 1; alert('pwned')</script><img src=x onerror=\"window.__pwned = 2\">"


def ensure_chromium() -> Path:
    """Debian's chromium; installed here when missing and apt-get is usable (root, as in CI)."""
    if (
        not CHROMIUM.exists()
        and shutil.which("apt-get")
        and os.geteuid() == 0
        and not os.environ.get("EDGEROUTE_NO_APT")
    ):
        subprocess.run(["apt-get", "update", "-qq"], check=False, timeout=600, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"], check=False, timeout=900, capture_output=True
        )
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real pool member: llama.cpp's own OpenAI-compatible server."""
    proc = llama_server(tmp_path_factory.mktemp("member"), name="gpu-b")
    with running(proc):
        yield proc


@pytest.fixture(scope="module")
def node_app(tmp_path_factory: pytest.TempPathFactory, member: Any) -> Any:
    data = tmp_path_factory.mktemp("node-data")
    settings = load_settings(
        data_dir=data,
        telemetry={"dashboard": {"tick_s": 1.0}},
        cloud={"members": [llama_settings(member, "gpu-b").model_dump()], "health_interval_s": 1.0},
    )
    return create_node_app(settings)


@pytest.fixture(scope="module")
def base_url(node_app: Any) -> Iterator[str]:
    with serve(node_app) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", timeout=120, max_retries=0)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = ensure_chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS)
        yield b
        b.close()


class Page:
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

    def open(self, url: str) -> Any:
        self.page.goto(url)
        # The SSE stream is open once app.js has seen htmx:sseOpen.
        self.page.wait_for_selector('#live-status[data-state="live"]', timeout=15_000)
        return self.page

    def shot(self, name: str, full_page: bool = False) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any) -> Iterator[Page]:
    page = Page(browser)
    yield page
    page.close()


def ask(client: openai.OpenAI, text: str, *, stream: bool = False) -> str:
    messages: Any = [{"role": "user", "content": text}]
    if stream:
        chunks = client.chat.completions.create(model="auto", messages=messages, max_tokens=8, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reply = client.chat.completions.create(model="auto", messages=messages, max_tokens=8, temperature=0)
    return reply.choices[0].message.content or ""


def test_overview_loads_without_console_errors(tab: Page, base_url: str, client: openai.OpenAI) -> None:
    ask(client, "Say hello.")
    page = tab.open(f"{base_url}/dashboard")
    assert page.title() == "Overview · edgeroute"
    assert page.locator("#stats figure.chart > svg").count() == 2
    page.wait_for_timeout(1500)  # let a stats push land, so late errors would show
    tab.shot("overview", full_page=True)
    assert tab.errors == []


def test_feed_and_counters_update_live(tab: Page, base_url: str, client: openai.OpenAI) -> None:
    page = tab.open(f"{base_url}/dashboard")
    page.evaluate("window.__sameDocument = true")
    before = int(page.inner_text("#stat-total"))
    rows_before = page.locator("#mini-feed tr.row").count()
    ask(client, "Name a colour.")
    expect(page.locator("#stat-total")).to_have_text(str(before + 1), timeout=LIVE_MS)
    expect(page.locator("#mini-feed tr.row")).to_have_count(min(rows_before + 1, 8), timeout=LIVE_MS)
    assert page.evaluate("window.__sameDocument") is True  # updated in place, not reloaded
    assert page.inner_text("#mini-feed tr.row >> nth=0 >> .badge") == "edge"

    feed = tab.open(f"{base_url}/dashboard/feed")
    feed.evaluate("window.__sameDocument = true")
    count = feed.locator("#feed-rows tr.row").count()
    ask(client, "Is water wet?", stream=True)
    expect(feed.locator("#feed-rows tr.row")).to_have_count(count + 1, timeout=LIVE_MS)
    newest = feed.locator("#feed-rows tr.row").first
    assert "Is water wet?" in newest.inner_text()
    newest.click()
    feed.wait_for_selector("#details dl.kv", timeout=5000)
    details = feed.inner_text("#details")
    assert "Is water wet?" in details and "\nreason\n" in details
    assert feed.evaluate("window.__sameDocument") is True
    tab.shot("feed")
    assert tab.errors == []


def test_script_prompt_stays_inert(tab: Page, base_url: str, client: openai.OpenAI) -> None:
    page = tab.open(f"{base_url}/dashboard/feed")
    ask(client, EVIL)
    expect(page.locator("#feed-rows tr.row td.prompt").first).to_contain_text("<script>", timeout=LIVE_MS)
    row = page.locator("#feed-rows tr.row").first
    assert "<script>window.__pwned = 1" in row.inner_text()
    row.click()
    page.wait_for_selector("#details pre.prompt-text", timeout=5000)
    assert page.inner_text("#details pre.prompt-text").startswith("<script>window.__pwned = 1")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned === undefined") is True
    assert page.locator("main script, main img").count() == 0
    assert tab.dialogs == []
    tab.shot("feed-script-prompt")
    # The same text on the overview after a reload (server-rendered, not only SSE-swapped).
    overview = tab.open(f"{base_url}/dashboard")
    assert overview.evaluate("window.__pwned === undefined") is True
    assert tab.dialogs == []


def test_cache_hit_rows_show_as_such(
    tab: Page, base_url: str, client: openai.OpenAI, node_app: Any
) -> None:
    page = tab.open(f"{base_url}/dashboard/feed")
    question = "What is the capital of France?"
    first = ask(client, question)
    again = ask(client, question)  # deterministic and repeated: answered by the real cache
    assert again == first
    # The node's side first, so a failure below is the page's and not the cache's.
    recent = node_app.state.node.telemetry.recent(2)
    assert [(e.route, e.cache) for e in recent] == [("cache-exact", "hit"), ("edge", "miss")], [
        (e.route, e.reason, e.cache, e.cache_refusal, e.member) for e in recent
    ]
    expect(page.locator("#feed-rows tr .badge.r-cache-exact")).to_have_count(1, timeout=LIVE_MS)
    overview = tab.open(f"{base_url}/dashboard")
    assert overview.inner_text("#split-cache-exact") != "0"


def test_pool_page_shows_a_killed_member_down(tab: Page, base_url: str, member: Any) -> None:
    page = tab.open(f"{base_url}/dashboard/pool")
    expect(page.locator('tr[data-member="gpu-b"] [data-health]')).to_have_text("up", timeout=10_000)
    tab.shot("pool")
    member.kill()
    # Health checks every second find it gone; the pool panel refreshes every tick (1 s here).
    expect(page.locator('tr.member.down[data-member="gpu-b"]')).to_have_count(1, timeout=20_000)
    assert page.inner_text('tr[data-member="gpu-b"] [data-health]') == "down"
    tab.shot("pool-member-down")
    assert tab.errors == []


def test_cache_page_search_and_delete(tab: Page, base_url: str, client: openai.OpenAI, node_app: Any) -> None:
    ask(client, "What is the capital of Spain?")
    page = tab.open(f"{base_url}/dashboard/cache")
    page.fill('input[name="q"]', "capital of Spain")
    page.click("form.search button")
    page.wait_for_selector("#results tr[data-entry-id]", timeout=5000)
    rows = page.locator("#results tr[data-entry-id]")
    assert rows.count() == 1
    entry_id = rows.first.get_attribute("data-entry-id")
    tab.shot("cache")
    page.click(f'#results tr[data-entry-id="{entry_id}"] button.danger')
    page.wait_for_selector("#results tr.deleted", timeout=5000)
    assert tab.dialogs == [f"confirm: Delete cache entry {entry_id}?"]
    assert tab.errors == []


def test_metrics_of_the_running_node(base_url: str, client: openai.OpenAI, node_app: Any) -> None:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    ask(client, "One more.")
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    names = {f.name: f for f in text_string_to_metric_families(text)}
    requests = {
        tuple(sorted(s.labels.items())): s.value
        for s in names["edgeroute_requests"].samples
        if s.name == "edgeroute_requests_total"
    }
    assert sum(v for k, v in requests.items() if ("route", "edge") in k) >= 1
    capacity = node_app.state.node.edge.load().capacity
    assert [s.value for s in names["edgeroute_edge_capacity"].samples] == [capacity]
    assert [s.value for s in names["edgeroute_edge_queue_depth"].samples] == [0]
    assert {s.labels["member"] for s in names["edgeroute_pool_member_up"].samples} == {"gpu-b"}
