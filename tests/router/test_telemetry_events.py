"""DecisionEvent: the contract's fields, validation, privacy, row round trip; the request record's timing."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest

from models import GenerationRequest, SamplingParams, Usage
from router.policy import Decision
from router.record import RequestContext, RequestRecord
from router.telemetry import DecisionEvent
from router.telemetry.errors import InvalidEventError
from router.telemetry.events import PREVIEW_CHARS

CONTRACT_COLUMNS = [
    "ts",
    "request_id",
    "tenant",
    "model",
    "route",
    "reason",
    "fallback",
    "degraded",
    "status",
    "error",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "ttft_ms",
    "similarity",
    "complexity",
    "member",
    "stream",
    "private",
    "prompt_preview",
    "features",
]


def make(**fields: object) -> DecisionEvent:
    base: dict[str, object] = dict(
        ts=1000.0, request_id="r1", tenant="t", model="auto", route="edge", reason="short"
    )
    base.update(fields)
    return DecisionEvent(**base)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class FakeFeatures:
    prompt_tokens: int
    complexity: float | None
    hint: str


def test_row_has_every_contract_column_in_order() -> None:
    row = make().to_row()
    assert list(row)[: len(CONTRACT_COLUMNS)] == CONTRACT_COLUMNS
    assert list(row)[len(CONTRACT_COLUMNS) :] == ["cache", "cache_refusal"]


def test_row_round_trip() -> None:
    event = make(
        fallback="cloud->edge",
        degraded="cloud-unavailable",
        prompt_tokens=7,
        completion_tokens=9,
        latency_ms=12.5,
        ttft_ms=3.25,
        similarity=0.97,
        complexity=0.12,
        member="m1",
        stream=True,
        prompt_preview="hi",
        features={"prompt_tokens": 7, "hint": "auto"},
        cache="miss",
        cache_refusal="negation",
    )
    row = event.to_row()
    assert row["stream"] == 1 and row["private"] == 0
    assert json.loads(row["features"]) == {"prompt_tokens": 7, "hint": "auto"}
    assert DecisionEvent.from_row(row) == event


def test_features_dataclass_becomes_dict() -> None:
    event = make(features=FakeFeatures(prompt_tokens=5, complexity=None, hint="edge"))
    assert event.features == {"prompt_tokens": 5, "complexity": None, "hint": "edge"}
    assert json.loads(event.to_row()["features"]) == {"prompt_tokens": 5, "complexity": None, "hint": "edge"}


def test_private_prompt_is_never_kept() -> None:
    assert make(private=True, prompt_preview="my card is 4111 1111 1111 1111").prompt_preview == ""


def test_preview_is_cut_to_200_chars() -> None:
    assert make(prompt_preview="x" * 500).prompt_preview == "x" * PREVIEW_CHARS
    assert PREVIEW_CHARS == 200


def test_cache_route_implies_a_hit() -> None:
    assert make(route="cache-semantic", similarity=0.95).cache == "hit"
    assert make(route="edge").cache is None
    assert make(route="edge", cache="miss").cache == "miss"


@pytest.mark.parametrize(
    ("field", "value"),
    [("route", "gpu"), ("status", "fine"), ("cache", "maybe"), ("features", ["not", "a", "dict"])],
)
def test_invalid_fields_are_rejected(field: str, value: object) -> None:
    with pytest.raises(InvalidEventError):
        make(**{field: value})


def test_the_request_record_measures_latency_and_ttft() -> None:
    gen = GenerationRequest(SamplingParams(), model="edge", request_id="r9")
    record = RequestRecord(gen, RequestContext(tenant="t", stream=True), prompt="hello", route="edge")
    record.started = time.perf_counter()
    assert record.event(None).ttft_ms is None
    record.first_token()
    first = record.first_token_at
    time.sleep(0.01)
    record.first_token()  # only the first call counts
    assert record.first_token_at == first
    record.usage = Usage(3, 4)
    event = record.event(None)
    assert event.request_id == "r9" and event.stream is True and event.prompt_preview == "hello"
    assert event.ttft_ms is not None and event.ttft_ms >= 0
    assert event.latency_ms >= event.ttft_ms + 10 - 0.5
    assert (event.prompt_tokens, event.completion_tokens) == (3, 4)


def test_a_failed_private_request_is_recorded_with_its_decision_and_no_preview() -> None:
    gen = GenerationRequest(SamplingParams(), model="m", request_id="r")
    decision = Decision("cloud", "no-capacity", 1.0)
    record = RequestRecord(gen, prompt="secret", private=True, decision=decision, cache="off")
    event = record.event("boom")
    assert event.prompt_preview == "" and event.status == "error" and event.error == "boom"
    assert (event.route, event.reason, event.cache) == ("error", "no-capacity", None)
    assert record.error_headers("server_error")["x-edgeroute-reason"] == "no-capacity"
