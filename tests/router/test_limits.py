"""The caps of one request, the JSON depth, body timeouts and per-tenant rates, against real nodes
on loopback (the real edge model)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from edgeroute.app import create_app
from router import load_settings
from router.admission import json_depth
from router.limits import LimitSettings, RateLimiter
from router.errors import RequestsRateLimitError, TokensRateLimitError
from loadtest.servers import serve_app

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
HI = [{"role": "user", "content": "Reply with one word: yes"}]


def post(base: str, path: str, body: Any = None, content: bytes | None = None, **headers: str) -> httpx.Response:
    hdrs = {"content-type": "application/json", **headers}
    return httpx.post(base + path, json=body, content=content, headers=hdrs, timeout=120)


def error_of(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]  # type: ignore[no-any-return]


# -- caps, on the session's edge-only node ------------------------------------------------------


def test_20000_messages_are_refused_before_anything_tokenizes_them(node_url: str) -> None:
    messages = [{"role": "user", "content": f"m{i}"} for i in range(20_000)]
    resp = post(node_url, CHAT, {"messages": messages, "max_tokens": 1})
    assert resp.status_code == 400
    err = error_of(resp)
    assert (err["type"], err["code"], err["param"]) == ("invalid_request_error", "array_above_max_length", "messages")
    assert err["message"] == "too many messages: 20000 (at most 2048)"
    assert resp.headers["x-edgeroute-reason"] == "array-above-max-length"


def test_a_4mb_message_is_refused_before_anything_tokenizes_it(node_url: str) -> None:
    resp = post(node_url, CHAT, {"messages": [{"role": "user", "content": "a" * 4_000_000}]})
    assert resp.status_code == 400
    err = error_of(resp)
    assert (err["code"], err["param"]) == ("string_above_max_length", "messages.0.content")
    assert err["message"] == "messages.0.content is too long: 4000000 characters (at most 1000000)"


def test_too_many_content_parts(node_url: str) -> None:
    parts = [{"type": "text", "text": "x"}] * 300
    resp = post(node_url, CHAT, {"messages": [{"role": "user", "content": parts}]})
    assert resp.status_code == 400
    assert (error_of(resp)["code"], error_of(resp)["param"]) == ("array_above_max_length", "messages.0.content")


def test_a_heavy_prompt_beyond_the_window_is_refused_from_its_length(node_url: str) -> None:
    """2,000 messages of 400 characters are within the caps; rendering and tokenizing them took
    most of a second (on a worker thread). Their length alone says they cannot fit the edge's
    window, so they are refused without either, and /healthz answers meanwhile."""
    messages = [{"role": "user", "content": f"{i} " + "lorem ipsum dolor sit amet " * 15} for i in range(2000)]
    done: list[float] = []
    result: list[httpx.Response] = []

    def heavy() -> None:
        result.append(post(node_url, CHAT, {"messages": messages, "max_tokens": 1}))
        done.append(time.monotonic())

    worker = threading.Thread(target=heavy)
    worker.start()
    answered: list[float] = []
    while worker.is_alive():
        resp = httpx.get(node_url + "/healthz", timeout=30)
        assert resp.status_code == 200
        answered.append(time.monotonic())
    worker.join()
    assert result[0].status_code == 400  # longer than the edge's context
    assert error_of(result[0])["code"] == "context_length_exceeded"
    # 818,890 characters over the longest piece (81 bytes): no tokenizer needed to know
    assert "the prompt has at least 10109 tokens" in error_of(result[0])["message"]
    assert answered  # /healthz answered while it was in flight


def test_deep_json_is_a_400_before_parsing(node_url: str) -> None:
    deep = b'{"messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    resp = post(node_url, CHAT, content=deep)
    assert resp.status_code == 400
    err = error_of(resp)
    assert (err["type"], err["code"]) == ("invalid_request_error", "json_too_deep")
    assert err["message"] == "the JSON body is nested deeper than 64 levels"
    resp = post(node_url, "/v1/completions", content=b"[" * 100_000)
    assert (resp.status_code, error_of(resp)["code"]) == (400, "json_too_deep")
    # Brackets inside strings are text, not nesting.
    text = {"messages": [{"role": "user", "content": "[" * 500 + "say ok"}], "max_tokens": 1}
    assert post(node_url, CHAT, text).status_code == 200


def test_json_depth() -> None:
    assert json_depth(b'{"a": [1, {"b": [[]]}]}', 2) == 5
    assert json_depth(b'{"a": "[[[[[[[[[[", "b": "\\"[[[["}', 2) == 1
    assert json_depth(b'{"a": [1]}', 8) == 0  # too few openers to matter: not scanned


def test_an_empty_prompt_is_answered(node_url: str) -> None:
    resp = post(node_url, "/v1/completions", {"prompt": "", "max_tokens": 2, "temperature": 0})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["object"] == "text_completion"
    assert body["usage"]["completion_tokens"] <= 2
    resp = post(node_url, "/v1/completions", {"prompt": [""], "max_tokens": 2, "stream": True})
    assert resp.status_code == 200
    assert resp.text.rstrip().endswith("data: [DONE]")


def test_a_declared_body_over_the_cap_is_413(node_url: str) -> None:
    resp = post(node_url, CHAT, content=b"x" * (4 * 1024 * 1024 + 1))
    assert resp.status_code == 413
    assert error_of(resp)["code"] == "body_too_large"


# -- a node with rates and a short body timeout --------------------------------------------------


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("limited"),
        cloud={"local_member": False},
        cache={"enabled": False},
        server={"body_timeout_s": 1.0},
        limits={
            "requests_per_minute": 2,
            "request_burst_s": 60,  # a whole minute's allowance at once: two requests, then 429
            "tenants": {"wide": {"requests_per_minute": 0, "tokens_per_minute": 600}, "narrow": {"tokens_per_minute": 50}},
        },
    )
    with serve_app(create_app(settings)) as base:
        yield base


def test_requests_per_minute_gives_429_with_retry_after_and_spares_other_tenants(limited: str) -> None:
    body = {"messages": HI, "max_tokens": 1}
    for _ in range(2):
        assert post(limited, CHAT, body, **{"x-edgeroute-tenant": "team-a"}).status_code == 200
    refused = post(limited, CHAT, body, **{"x-edgeroute-tenant": "team-a"})
    assert refused.status_code == 429
    err = error_of(refused)
    assert (err["type"], err["code"]) == ("requests", "rate_limit_exceeded")
    assert 1 <= int(refused.headers["retry-after"]) <= 30
    assert refused.headers["x-edgeroute-route"] == "error"
    assert refused.headers["x-edgeroute-reason"] == "rate-limit-exceeded"
    # Another tenant has its own allowance.
    assert post(limited, CHAT, body, **{"x-edgeroute-tenant": "team-b"}).status_code == 200


def test_tokens_per_minute_reserve_max_tokens_and_give_back_what_was_not_used(limited: str) -> None:
    body = {"messages": HI, "max_tokens": 250, "temperature": 0, "stop": ["."]}
    # Reserved: the prompt + 250 of 600; settled with the real usage: the next one fits again.
    for _ in range(3):
        resp = post(limited, CHAT, body, **{"x-edgeroute-tenant": "wide"})
        assert resp.status_code == 200, resp.text
        assert resp.json()["usage"]["completion_tokens"] < 60
    too_big = post(limited, CHAT, {**body, "max_tokens": 100}, **{"x-edgeroute-tenant": "narrow"})
    assert too_big.status_code == 429
    assert (error_of(too_big)["type"], error_of(too_big)["code"]) == ("tokens", "rate_limit_exceeded")
    assert "request too large" in error_of(too_big)["message"]


def test_a_body_that_never_finishes_gets_408(limited: str) -> None:
    host, port = limited.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 100\r\n\r\n{\"messages\":"
        )
        reply = b""
        while b'"code"' not in reply:
            part = sock.recv(65536)
            if not part:
                break
            reply += part
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert b'"code":"body_timeout"' in reply


# -- the limiter and its settings, without a node ------------------------------------------------


def test_the_limiter_refills_and_settles() -> None:
    now = [0.0]
    limiter = RateLimiter(
        LimitSettings(requests_per_minute=60, tokens_per_minute=100, request_burst_s=60), clock=lambda: now[0]
    )
    limiter.admit_request("a")
    for _ in range(59):
        limiter.admit_request("a")
    with pytest.raises(RequestsRateLimitError) as info:
        limiter.admit_request("a")
    assert info.value.retry_after == 1
    with pytest.raises(RequestsRateLimitError) as second:
        limiter.admit_request("a")
    assert second.value.retry_after == 2  # refused together: told different seconds, not all "1"
    now[0] = 1.0
    limiter.admit_request("a")  # one second refilled one request
    held = limiter.reserve_tokens("a", 90)
    with pytest.raises(TokensRateLimitError) as tokens:
        limiter.reserve_tokens("a", 20)
    assert tokens.value.retry_after == 6  # 10 left, 10 more at 100/60 a second
    with pytest.raises(TokensRateLimitError) as later:
        limiter.reserve_tokens("a", 20)
    assert later.value.retry_after == 18  # refused after it: told to come 20 tokens (12 s) later
    limiter.settle(held, 30)  # 60 given back
    assert limiter.reserve_tokens("a", 20) is not None


def test_limits_from_the_environment_and_per_tenant(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EDGEROUTE_LIMITS__REQUESTS_PER_MINUTE", "120")
    cfg = tmp_path / "c.toml"
    cfg.write_text("[limits]\ntokens_per_minute = 1000\n[limits.tenants.big]\nrequests_per_minute = 0\n")
    limits = load_settings(cfg).limits
    assert limits.rates("anyone") == (120, 1000)
    assert limits.rates("big") == (0, 1000)


def test_buckets_that_refilled_are_forgotten_beyond_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import router.limits as limits_module

    monkeypatch.setattr(limits_module, "_MAX_BUCKETS", 3)
    now = [0.0]
    limiter = RateLimiter(LimitSettings(requests_per_minute=60), clock=lambda: now[0])
    for tenant in ("a", "b", "c"):
        limiter.admit_request(tenant)
    now[0] = 2.0  # a, b and c have refilled
    limiter.admit_request("d")
    assert sorted(limiter._requests) == ["d"]


def test_a_cache_hit_counts_as_a_request(tmp_path: Path) -> None:
    limits = {"requests_per_minute": 2, "request_burst_s": 60}
    settings = load_settings(data_dir=tmp_path / "d", cloud={"local_member": False}, limits=limits)
    with serve_app(create_app(settings)) as base:
        body = {"model": "edge", "messages": HI, "max_tokens": 2, "temperature": 0}
        first = post(base, CHAT, body)
        hit = post(base, CHAT, body)
        assert (first.status_code, hit.status_code) == (200, 200)
        assert hit.headers["x-edgeroute-route"] == "cache-exact"
        refused = post(base, CHAT, body)
        assert refused.status_code == 429
        assert error_of(refused)["type"] == "requests"


def test_a_shorter_burst_spreads_a_minutes_allowance() -> None:
    now = [0.0]
    settings = LimitSettings(requests_per_minute=60, request_burst_s=10)
    limiter = RateLimiter(settings, clock=lambda: now[0])
    headers = {}
    for _ in range(10):
        headers = limiter.admit_request("a")
    assert headers == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "10s",
    }
    with pytest.raises(RequestsRateLimitError) as info:
        limiter.admit_request("a")
    assert info.value.retry_after == 1
    now[0] = 1.0
    limiter.admit_request("a")  # the bucket refills at the minute's rate, one a second
    now[0] = 100.0
    for _ in range(10):
        limiter.admit_request("a")  # full again: never more than 10 at once
    with pytest.raises(RequestsRateLimitError):
        limiter.admit_request("a")


def test_the_default_burst_is_ten_seconds_of_the_rate(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[limits]\nrequests_per_minute = 600\n")
    assert load_settings(cfg).limits.request_burst_s == 10.0
    limiter = RateLimiter(load_settings(cfg).limits, clock=lambda: 0.0)
    assert limiter.admit_request("a")["x-ratelimit-remaining-requests"] == "99"
    cfg.write_text("[limits]\nrequests_per_minute = 600\nrequest_burst_s = 60\n")
    assert load_settings(cfg).limits.request_burst_s == 60.0
    limiter = RateLimiter(load_settings(cfg).limits, clock=lambda: 0.0)
    assert limiter.admit_request("a")["x-ratelimit-remaining-requests"] == "599"


def test_a_node_with_a_short_burst_refuses_beyond_it(tmp_path: Path) -> None:
    limits = {"requests_per_minute": 6, "request_burst_s": 20}  # 2 at once, then one each 10 s
    settings = load_settings(data_dir=tmp_path / "d", cloud={"local_member": False}, limits=limits)
    with serve_app(create_app(settings)) as base:
        body = {"model": "edge", "messages": HI, "max_tokens": 2, "temperature": 0}
        first = post(base, CHAT, body)
        assert first.status_code == 200
        assert first.headers["x-ratelimit-limit-requests"] == "6"
        assert first.headers["x-ratelimit-remaining-requests"] == "1"
        hit = post(base, CHAT, body)
        assert (hit.status_code, hit.headers["x-edgeroute-route"]) == (200, "cache-exact")
        assert hit.headers["x-ratelimit-remaining-requests"] == "0"
        refused = post(base, CHAT, body)
        assert refused.status_code == 429
        assert (error_of(refused)["type"], error_of(refused)["code"]) == ("requests", "rate_limit_exceeded")
        assert 1 <= int(refused.headers["retry-after"]) <= 10
