"""The login form in headless Chromium, on a node with an operator key (pages over in-memory fakes).

The real node's wiring of the keys is checked over HTTP in test_auth.py; here the browser's own
behaviour is the point: the redirect, the HttpOnly cookie, and EventSource sending it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from browserkit import Tab
from dashfakes import FakeNode, fake_app
from loadtest.servers import serve_app

pytestmark = [pytest.mark.browser]

KEY = "sk-dashboard-test"
TENANT_KEY = "sk-tenant-test"


@pytest.fixture
def keyed_url(node: FakeNode) -> Iterator[str]:
    with serve_app(fake_app(node, {TENANT_KEY: "acme"}, [KEY]), ready_path=None) as url:
        yield url


def test_login_in_the_browser(tab: Tab, keyed_url: str) -> None:
    page = tab.page
    page.goto(f"{keyed_url}/dashboard/pool")
    assert page.url == f"{keyed_url}/dashboard/login?next=/dashboard/pool"
    assert page.title() == "Log in · edgeroute"
    tab.shot("login")

    page.fill('input[name="key"]', "sk-wrong")
    with page.expect_response(f"{keyed_url}/dashboard/login") as refused:
        page.click("form.login button")
    assert refused.value.status == 401
    assert page.inner_text("#login-error") == "That key is not one of this node's API keys."
    assert page.input_value('input[name="next"]') == "/dashboard/pool"

    # Chromium logs the refused document load itself; that one message is expected, nothing else.
    assert tab.errors == ["Failed to load resource: the server responded with a status of 401 (Unauthorized)"]
    tab.errors.clear()
    page.fill('input[name="key"]', TENANT_KEY)
    with page.expect_response(f"{keyed_url}/dashboard/login") as forbidden:
        page.click("form.login button")
    assert forbidden.value.status == 403
    assert page.inner_text("#login-error").startswith("That is a tenant key.")
    assert tab.errors == ["Failed to load resource: the server responded with a status of 403 (Forbidden)"]
    tab.errors.clear()
    page.fill('input[name="key"]', KEY)
    page.click("form.login button")
    page.wait_for_url(f"{keyed_url}/dashboard/pool")
    tab.wait_live()  # EventSource sent the cookie: the live stream opened
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read the session
    assert page.locator('tr[data-member="gpu-b"]').count() == 1
    page.click('a[href="/dashboard/feed"]')
    page.wait_for_url(f"{keyed_url}/dashboard/feed")
    tab.wait_live()
    assert tab.errors == []

    page.click("form.logout button")
    page.wait_for_url(f"{keyed_url}/dashboard/login")
    page.goto(f"{keyed_url}/dashboard")
    assert page.url == f"{keyed_url}/dashboard/login?next=/dashboard"
