"""The dashboard in headless Chromium against a running node with real models.

The node is ``create_app`` served by uvicorn: ``open_node`` loads the real edge model, the real
SQLite-vector cache and a real cloud pool of two members, each llama.cpp's own
OpenAI-compatible server (``llama_cpp.server``). Requests go through the official ``openai`` SDK;
the pages must update live (SSE) without a reload. Each test stands alone, in any order: the
pool test kills only ``gpu-b``, which no other test relies on, and where the side that answers
does not matter a test reads it from the node rather than assuming it. Screenshots of every page
are saved under artifacts/screenshots/.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import openai
import pytest
from playwright.sync_api import expect
from prometheus_client.parser import text_string_to_metric_families

from browserkit import Tab
from edgeroute.app import create_app
from loadtest.servers import serve_app, settled
from router import load_settings
from tests.cloud.cloud_servers import llama_server, llama_settings, running

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LIVE_MS = 2000  # the acceptance bound: updates within 2 s, no reload
EVIL = "<script>window.__pwned = 1; alert('pwned')</script><img src=x onerror=\"window.__pwned = 2\">"
EVIL_CACHED = (
    "<script>window.__pwned = 3; alert('cache')</script>Cache me <img src=x onerror=\"window.__pwned = 4\">"
)
STEADY, DOOMED = "gpu-a", "gpu-b"  # the pool test kills DOOMED; STEADY stays up throughout


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two real pool members (llama.cpp servers), so killing one leaves the pool working."""
    logs = tmp_path_factory.mktemp("members")
    with ExitStack() as stack:
        yield {name: stack.enter_context(running(llama_server(logs, name=name))) for name in (STEADY, DOOMED)}


@pytest.fixture(scope="module")
def node_app(tmp_path_factory: pytest.TempPathFactory, members: dict[str, Any]) -> Any:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("node-data"),
        telemetry={"dashboard": {"tick_s": 1.0}},
        cloud={
            "members": [llama_settings(proc, name).model_dump() for name, proc in members.items()],
            "health_interval_s": 1.0,
        },
    )
    return create_app(settings)


@pytest.fixture(scope="module")
def base_url(node_app: Any) -> Iterator[str]:
    with serve_app(node_app, ready_path=None, timeout=180) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", timeout=120, max_retries=0)


def ask(client: openai.OpenAI, text: str, *, stream: bool = False, model: str = "auto") -> str:
    messages: Any = [{"role": "user", "content": text}]
    if stream:
        chunks = client.chat.completions.create(model=model, messages=messages, max_tokens=8, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reply = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
    return reply.choices[0].message.content or ""


def decisions(node_app: Any, n: int) -> list[Any]:
    """The node's last ``n`` decisions, newest first (once no API request is in flight)."""
    return list(settled(node_app).state.node.telemetry.recent(n))


def test_overview_loads_without_console_errors(tab: Tab, base_url: str, client: openai.OpenAI) -> None:
    ask(client, "Say hello.")
    page = tab.open(f"{base_url}/dashboard")
    assert page.title() == "Overview · edgeroute"
    assert page.locator("#stats figure.chart > svg").count() == 2
    page.wait_for_timeout(1500)  # let a stats push land, so late errors would show
    tab.shot("overview", full_page=True)
    assert tab.errors == []


def test_feed_and_counters_update_live(
    tab: Tab, base_url: str, client: openai.OpenAI, node_app: Any
) -> None:
    page = tab.open(f"{base_url}/dashboard")
    page.evaluate("window.__sameDocument = true")
    before = int(page.inner_text("#stat-total"))
    rows_before = page.locator("#mini-feed tr.row").count()
    ask(client, "Name a colour.")
    expect(page.locator("#stat-total")).to_have_text(str(before + 1), timeout=LIVE_MS)
    expect(page.locator("#mini-feed tr.row")).to_have_count(min(rows_before + 1, 8), timeout=LIVE_MS)
    assert page.evaluate("window.__sameDocument") is True  # updated in place, not reloaded
    # Whichever side answered, the newest row says the route the node recorded.
    newest = decisions(node_app, 1)[0]
    assert newest.prompt_preview == "Name a colour."
    assert page.inner_text("#mini-feed tr.row >> nth=0 >> .badge") == newest.route

    feed = tab.open(f"{base_url}/dashboard/feed")
    feed.evaluate("window.__sameDocument = true")
    count = feed.locator("#feed-rows tr.row").count()
    ask(client, "Is water wet?", stream=True)
    expect(feed.locator("#feed-rows tr.row")).to_have_count(count + 1, timeout=LIVE_MS)
    row = feed.locator("#feed-rows tr.row").first
    assert "Is water wet?" in row.inner_text()
    row.click()
    feed.wait_for_selector("#details dl.kv", timeout=5000)
    details = feed.inner_text("#details")
    assert "Is water wet?" in details and "\nreason\n" in details
    assert feed.evaluate("window.__sameDocument") is True
    tab.shot("feed")
    assert tab.errors == []


def test_script_prompt_stays_inert(tab: Tab, base_url: str, client: openai.OpenAI) -> None:
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
    tab: Tab, base_url: str, client: openai.OpenAI, node_app: Any
) -> None:
    page = tab.open(f"{base_url}/dashboard/feed")
    question = "What is the capital of France?"
    first = ask(client, question)
    again = ask(client, question)  # the same request again: answered by the real exact cache
    assert again == first
    # The node's side first, so a failure below is the page's and not the cache's.
    recent = decisions(node_app, 2)
    seen = [(e.route, e.reason, e.cache, e.cache_refusal, e.member) for e in recent]
    assert [e.cache for e in recent] == ["hit", "miss"], seen
    assert recent[0].route == "cache-exact" and recent[1].route in ("edge", "cloud"), seen
    expect(page.locator("#feed-rows tr .badge.r-cache-exact")).to_have_count(1, timeout=LIVE_MS)
    overview = tab.open(f"{base_url}/dashboard")
    assert int(overview.inner_text("#split-cache-exact")) >= 1


def test_pool_page_shows_a_killed_member_down(tab: Tab, base_url: str, members: dict[str, Any]) -> None:
    page = tab.open(f"{base_url}/dashboard/pool")
    health = 'tr[data-member="{}"] [data-health]'
    expect(page.locator(health.format(DOOMED))).to_have_text("up", timeout=10_000)
    tab.shot("pool")
    members[DOOMED].kill()
    # Health checks every second find it gone; the pool panel refreshes every tick (1 s here).
    expect(page.locator(f'tr.member.down[data-member="{DOOMED}"]')).to_have_count(1, timeout=20_000)
    assert page.inner_text(health.format(DOOMED)) == "down"
    assert page.inner_text(health.format(STEADY)) == "up"
    tab.shot("pool-member-down")
    assert tab.errors == []


def search_cache(page: Any, text: str) -> Any:
    page.fill('input[name="q"]', text)
    page.click("form.search button")
    page.wait_for_selector("#results tr[data-entry-id]", timeout=5000)
    return page.locator("#results tr[data-entry-id]")


def test_cache_page_search_and_delete(tab: Tab, base_url: str, client: openai.OpenAI) -> None:
    ask(client, "What is the capital of Spain?")
    page = tab.open(f"{base_url}/dashboard/cache")
    rows = search_cache(page, "capital of Spain")
    assert rows.count() == 1
    entry_id = rows.first.get_attribute("data-entry-id")
    tab.shot("cache")
    page.click(f'#results tr[data-entry-id="{entry_id}"] button.danger')
    page.wait_for_selector("#results tr.deleted", timeout=5000)
    assert page.inner_text("#results tr.deleted") == f"Entry {entry_id} deleted."
    assert tab.dialogs == [f"confirm: Delete cache entry {entry_id}?"]
    assert tab.errors == []


def test_cache_search_shows_a_script_entry_as_text(tab: Tab, base_url: str, client: openai.OpenAI) -> None:
    ask(client, EVIL_CACHED)
    page = tab.open(f"{base_url}/dashboard/cache")
    rows = search_cache(page, "Cache me")  # swapped in by htmx
    assert rows.count() == 1
    assert "<script>window.__pwned = 3" in rows.first.inner_text()
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned === undefined") is True
    assert page.locator("#results script, #results img").count() == 0
    tab.shot("cache-script-entry")
    # The same search rendered by the server on a full page load.
    again = tab.open(f"{base_url}/dashboard/cache?q=Cache+me")
    assert again.locator("#results tr[data-entry-id]").count() == 1
    assert again.evaluate("window.__pwned === undefined") is True
    assert tab.dialogs == [] and tab.errors == []


def scrape(base_url: str) -> dict[str, Any]:
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    return {f.name: f for f in text_string_to_metric_families(text)}


def requests_by_labels(families: dict[str, Any]) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in families.values()
        for s in family.samples
        if s.name == "edgeroute_requests_total"
    }


def test_metrics_of_the_running_node(base_url: str, client: openai.OpenAI, node_app: Any) -> None:
    before = requests_by_labels(scrape(base_url))
    ask(client, "Count this one on the edge.", model="edge")
    after_families = scrape(base_url)
    after = requests_by_labels(after_families)
    newest = decisions(node_app, 1)[0]
    assert newest.route == "edge"
    labels = (("reason", newest.reason), ("route", "edge"), ("status", "ok"))
    assert after[labels] - before.get(labels, 0.0) == 1
    assert sum(after.values()) - sum(before.values()) == 1
    capacity = node_app.state.node.edge.load().capacity
    assert [s.value for s in after_families["edgeroute_edge_capacity"].samples] == [capacity]
    assert [s.value for s in after_families["edgeroute_edge_queue_depth"].samples] == [0]
    up = after_families["edgeroute_pool_member_up"].samples
    assert {s.labels["member"] for s in up} == {STEADY, DOOMED}
