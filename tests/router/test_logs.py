"""The node's logs: one line per request, JSON when asked, no httpx chatter."""

from __future__ import annotations

import dataclasses
import json
import logging

import httpx
import pytest

from router.logs import JsonFormatter, configure_logging, log_request
from router.telemetry import DecisionEvent

EVENT = DecisionEvent(
    ts=0.0, request_id="rid-1", tenant="acme", model="auto", route="edge", reason="short-prompt",
    prompt_tokens=12, completion_tokens=3, latency_ms=41.26, ttft_ms=9.04,
)


def test_one_request_line_with_its_fields(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="edgeroute.requests"):
        log_request(EVENT)
    [record] = caplog.records
    assert record.getMessage() == (
        "rid-1 tenant=acme model=auto route=edge reason=short-prompt status=ok latency_ms=41.3 "
        "ttft_ms=9.0 prompt_tokens=12 completion_tokens=3"
    )
    line = json.loads(JsonFormatter().format(record))
    assert (line["level"], line["logger"], line["request_id"], line["route"], line["completion_tokens"]) == (
        "info", "edgeroute.requests", "rid-1", "edge", 3
    )


def test_values_that_would_forge_fields_are_quoted(caplog: pytest.LogCaptureFixture) -> None:
    forged = dataclasses.replace(
        EVENT, tenant="acme route=cloud status=ok", model="", member='m"1\\', completion_tokens=0,
        status="error", error="bad\nline two", ttft_ms=None,
    )
    with caplog.at_level(logging.INFO, logger="edgeroute.requests"):
        log_request(forged)
        log_request(dataclasses.replace(EVENT, tenant="caf\u00e9\u2028x"))
    first, second = (r.getMessage() for r in caplog.records)
    assert first == (
        'rid-1 tenant="acme route=cloud status=ok" model="" route=edge reason=short-prompt status=error '
        'latency_ms=41.3 prompt_tokens=12 completion_tokens=0 member="m\\"1\\\\" error="bad\\nline two"'
    )
    assert second.startswith('rid-1 tenant="caf\u00e9\\u2028x" model=auto ')
    # The JSON format keeps each value as it was.
    line = json.loads(JsonFormatter().format(caplog.records[0]))
    assert (line["tenant"], line["model"], line["member"], line["error"]) == (
        "acme route=cloud status=ok", "", 'm"1\\', "bad\nline two"
    )


def test_configure_logging_quiets_httpx() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("info", "json")
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        logging.getLogger("httpx").setLevel(logging.NOTSET)
        logging.getLogger("httpcore").setLevel(logging.NOTSET)


def test_the_request_id_is_echoed_and_logged(node_url: str, caplog: pytest.LogCaptureFixture) -> None:
    body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0}
    with caplog.at_level(logging.INFO, logger="edgeroute.requests"):
        resp = httpx.post(node_url + "/v1/chat/completions", json=body, headers={"x-request-id": "trace-42"}, timeout=60)
    assert resp.status_code == 200
    assert resp.headers["x-request-id"] == "trace-42"
    lines = [r for r in caplog.records if r.name == "edgeroute.requests"]
    assert [r.request_id for r in lines] == ["trace-42"]  # type: ignore[attr-defined]
    bad = httpx.post(node_url + "/v1/chat/completions", json={"messages": []}, headers={"x-request-id": "t-43"}, timeout=60)
    assert (bad.status_code, bad.headers["x-edgeroute-route"], bad.headers["x-request-id"]) == (400, "error", "t-43")
    odd = httpx.post(node_url + "/v1/chat/completions", json=body, headers={"x-request-id": "a b"}, timeout=60)
    assert odd.headers["x-request-id"] != "a b" and len(odd.headers["x-request-id"]) == 32  # a fresh one
