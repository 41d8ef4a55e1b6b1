"""The cache as clients use it, over HTTP on a real node (real model, embedder, verifier, SQLite)
with the real ``openai`` SDK: default requests are cached, answers can be rated through
``POST /v1/feedback``, ratings are tenant-scoped and move the tenant's serving rule."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pysqlite3 as sqlite3  # the node's own SQLite: another library on its file would break its locks
import pytest

from edgeroute.app import create_app
from router import load_settings
from loadtest.servers import serve_app

KEYS = {"key-a": "team-a", "key-b": "team-b", "key-c": "team-c", "key-d": "team-d"}
OPERATOR = "op-key"
LIMITED_RPM = 60  # team-c's requests per minute: a bucket of 10 (limits.request_burst_s), 1 a second back


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("feedback")


@pytest.fixture(scope="module")
def node(data_dir: Path) -> Iterator[str]:
    settings = load_settings(
        data_dir=data_dir, edge={"n_ctx": 2048}, cloud={"local_member": False},
        server={"api_keys": KEYS, "operator_keys": [OPERATOR]},
        limits={"tenants": {"team-c": {"requests_per_minute": LIMITED_RPM}}},
    )
    with serve_app(create_app(settings)) as base:
        yield base


def sdk(node: str, key: str = "key-a") -> openai.OpenAI:
    return openai.OpenAI(base_url=node + "/v1", api_key=key, max_retries=0, timeout=120)


def rate(node: str, key: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(node + "/v1/feedback", json=body, headers={"authorization": f"Bearer {key}"}, timeout=30)


def test_the_sdk_with_no_sampling_settings_gets_exact_then_semantic_hits(node: str) -> None:
    client = sdk(node)
    ask = [{"role": "user", "content": "What is an edge node?"}]
    first = client.chat.completions.with_raw_response.create(model="auto", messages=ask)  # type: ignore[arg-type]
    again = client.chat.completions.with_raw_response.create(model="auto", messages=ask)  # type: ignore[arg-type]
    assert (first.headers["x-edgeroute-route"], first.headers["x-edgeroute-cache"]) == ("edge", "miss")
    assert again.headers["x-edgeroute-route"] == "cache-exact"
    assert again.parse().choices[0].message.content == first.parse().choices[0].message.content
    # Sampled at a chat front-end's temperature: another draw, shared by the requests at that temperature.
    warm = client.chat.completions.with_raw_response.create(model="auto", messages=ask, temperature=0.7)  # type: ignore[arg-type]
    assert (warm.headers["x-edgeroute-route"], warm.headers["x-edgeroute-cache"]) == ("edge", "miss")
    warm_again = client.chat.completions.with_raw_response.create(
        model="auto", messages=ask, temperature=0.7)  # type: ignore[arg-type]
    assert warm_again.headers["x-edgeroute-route"] == "cache-exact"
    assert warm_again.parse().choices[0].message.content == warm.parse().choices[0].message.content
    para = [{"role": "user", "content": "What's an edge node?"}]
    near = client.chat.completions.with_raw_response.create(model="auto", messages=para)  # type: ignore[arg-type]
    assert near.headers["x-edgeroute-route"] == "cache-semantic"
    assert float(near.headers["x-edgeroute-verifier"]) >= 0.5
    # The request's own switch and the header opt out; the response says so.
    off = client.chat.completions.with_raw_response.create(
        model="auto", messages=ask, max_tokens=4, extra_body={"cache": False})  # type: ignore[arg-type]
    assert (off.headers["x-edgeroute-route"], off.headers["x-edgeroute-cache"]) == ("edge", "off")
    off = client.chat.completions.with_raw_response.create(
        model="auto", messages=ask, max_tokens=4, extra_headers={"x-edgeroute-cache": "false"})  # type: ignore[arg-type]
    assert off.headers["x-edgeroute-cache"] == "off"


def _semantic_hit(node: str, stored: str, asked: str, key: str = "key-a") -> openai.types.chat.ChatCompletion:
    client = sdk(node, key)
    client.chat.completions.create(model="auto", messages=[{"role": "user", "content": stored}], max_tokens=8)
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": asked}], max_tokens=8)
    assert raw.headers["x-edgeroute-route"] == "cache-semantic"
    return raw.parse()


def test_a_rating_is_stored_and_only_its_tenant_or_an_operator_may_give_it(node: str) -> None:
    hit = _semantic_hit(node, "How do I turn on dark mode?", "How can I turn on dark mode?")
    theirs = rate(node, "key-b", {"id": hit.id, "rating": "right"})
    unknown = rate(node, "key-b", {"id": "chatcmpl-" + "0" * 24, "rating": "right"})
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"]["message"].replace(hit.id, "X") == unknown.json()["error"]["message"].replace(
        "chatcmpl-" + "0" * 24, "X")
    assert {k: v for k, v in theirs.json()["error"].items() if k != "message"} == {
        "type": "invalid_request_error", "param": "id", "code": "not_found"}
    mine = rate(node, "key-a", {"id": hit.id, "rating": "right", "note": "fine"})
    assert mine.status_code == 200
    body = mine.json()
    assert (body["id"], body["object"], body["tenant"], body["rating"], body["note"], body["route"], body["rated_by"]) == (
        hit.id, "feedback", "team-a", "right", "fine", "cache-semantic", "tenant")
    assert body["query"] == "How can I turn on dark mode?" and body["verifier"] >= body["threshold"]
    by_operator = rate(node, OPERATOR, {"id": hit.id, "rating": "right"})
    assert (by_operator.status_code, by_operator.json()["rated_by"], by_operator.json()["note"]) == (200, "operator", None)
    # A generated answer can be rated too, a text completion's or a response's.
    made = sdk(node).completions.create(model="auto", prompt="Once upon a time", max_tokens=4, extra_body={"cache": False})
    assert rate(node, "key-a", {"id": made.id, "rating": "wrong"}).json()["route"] == "edge"
    response = sdk(node).responses.create(model="auto", input="Name a fruit.", max_output_tokens=4,
                                          extra_body={"cache": False})
    rated = rate(node, "key-a", {"id": response.id, "rating": "right"})
    assert (rated.status_code, rated.json()["id"], rated.json()["route"]) == (200, response.id, "edge")
    assert rate(node, "key-b", {"id": response.id, "rating": "right"}).status_code == 404


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"id": "x", "rating": "meh"}, "rating"),
        ({"rating": "right"}, "id"),
        ({"id": "", "rating": "right"}, "id"),
        ({"id": "x", "rating": "right", "note": "n" * 2001}, "note"),
        ({"id": "x", "rating": "right", "extra": 1}, "extra"),
    ],
)
def test_a_bad_rating_is_a_400_naming_the_field(node: str, body: dict[str, object], param: str) -> None:
    r = rate(node, "key-a", body)
    assert r.status_code == 400
    assert param in (r.json()["error"]["param"] or "") + r.json()["error"]["message"]


def test_no_key_no_rating(node: str) -> None:
    r = httpx.post(node + "/v1/feedback", json={"id": "x", "rating": "right"}, timeout=30)
    assert r.status_code == 401


def test_a_wrong_rating_stops_the_hit_and_moves_the_rule_shown_on_metrics(node: str) -> None:
    asked = "How should I reset my router password?"
    hit = _semantic_hit(node, "How do I reset my router password?", asked, key="key-b")
    assert rate(node, "key-b", {"id": hit.id, "rating": "wrong"}).status_code == 200
    again = sdk(node, "key-b").chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": asked}], max_tokens=8)
    # Not served that entry again: generated (and stored under the question itself).
    assert (again.headers["x-edgeroute-route"], again.headers["x-edgeroute-cache"]) == ("edge", "miss")
    metrics = httpx.get(node + "/metrics", headers={"authorization": f"Bearer {OPERATOR}"}, timeout=30).text
    line = next(x for x in metrics.splitlines() if x.startswith('edgeroute_cache_verifier_threshold{tenant="team-b"}'))
    assert float(line.split()[-1]) > 0.5
    assert 'edgeroute_cache_wrong_rate_bound{tenant="team-b"}' not in metrics  # no rated hit left at the new threshold


def test_the_feedback_operation_is_in_the_openapi_document(node: str) -> None:
    doc = httpx.get(node + "/openapi/openapi.json", timeout=30).json()
    op = doc["paths"]["/v1/feedback"]["post"]
    # 429: wrong keys are throttled per address; 408 / 413: the body's deadline and size cap.
    assert set(op["responses"]) == {"200", "400", "401", "404", "408", "413", "429", "503"}


def _chat(node: str, key: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(node + "/v1/chat/completions", json={"model": "auto", **body},
                      headers={"authorization": f"Bearer {key}"}, timeout=120)


def _route(answer: httpx.Response) -> tuple[str, str]:
    return answer.headers["x-edgeroute-route"], answer.headers["x-edgeroute-cache"]


def _text(answer: httpx.Response) -> str:
    return str(answer.json()["choices"][0]["message"]["content"])


def test_a_sampled_draw_is_never_served_to_a_request_for_the_likeliest_answer(node: str) -> None:
    ask = {"messages": [{"role": "user", "content": "Write one sentence about the sea."}], "max_tokens": 32}
    hot = _chat(node, "key-a", {**ask, "temperature": 2})
    assert (hot.status_code, *_route(hot)) == (200, "edge", "miss")
    draw = _text(hot)
    # The same sampled settings share the draw.
    again = _chat(node, "key-a", {**ask, "temperature": 2})
    assert (again.headers["x-edgeroute-route"], _text(again)) == ("cache-exact", draw)
    # The likeliest answer, asked for four ways: the first is generated, the rest get it from the cache.
    greedy = _chat(node, "key-a", {**ask, "temperature": 0})
    assert _route(greedy) == ("edge", "miss")
    likeliest = _text(greedy)
    assert likeliest != draw
    for narrowed in ({"temperature": 0.01}, {"top_k": 1}, {"temperature": 2, "top_k": 1}, {"top_p": 0},
                     {"temperature": 0.7, "top_p": 0.01}, {"min_p": 0.99}):
        served = _chat(node, "key-a", {**ask, **narrowed})
        assert (served.headers["x-edgeroute-route"], _text(served)) == ("cache-exact", likeliest), narrowed
    # Sampled at other settings: another draw, generated.
    for other in ({"temperature": 1.9}, {"temperature": 2, "top_p": 0.9}, {"temperature": 2, "top_k": 40}):
        served = _chat(node, "key-a", {**ask, **other})
        assert _route(served) == ("edge", "miss"), other


def test_ratings_meet_the_tenant_rate_limit(node: str) -> None:
    planet = {"messages": [{"role": "user", "content": "Name a planet."}], "max_tokens": 4}
    start = time.monotonic()
    asked = _chat(node, "key-c", planet)
    assert (asked.status_code, asked.headers["x-ratelimit-remaining-requests"]) == (200, "9")
    statuses: list[int] = []
    refusals: list[httpx.Response] = []
    with httpx.Client(base_url=node, headers={"authorization": "Bearer key-c"}, timeout=30) as client:
        for _ in range(300):
            r = client.post("/v1/feedback", json={"id": asked.json()["id"], "rating": "right"})
            if not statuses:  # admitted, with the bucket's state as every /v1 answer gives it
                assert r.headers["x-ratelimit-limit-requests"] == str(LIMITED_RPM)
            statuses.append(r.status_code)
            if r.status_code == 429:
                refusals.append(r)
    elapsed = time.monotonic() - start
    # The 9 left in the bucket of 10, then 429 but for the one request a second the bucket gets back.
    assert statuses[:9] == [200] * 9
    assert set(statuses) == {200, 429}
    assert 9 <= statuses.count(200) <= 9 + int(elapsed) + 1
    first = refusals[0]
    assert first.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(first.headers["retry-after"]) >= 1
    assert first.headers["x-ratelimit-limit-requests"] == str(LIMITED_RPM)
    # The same bucket as its completions; another tenant's ratings are not in it.
    assert _chat(node, "key-c", planet).status_code == 429
    assert rate(node, "key-a", {"id": "chatcmpl-" + "0" * 24, "rating": "right"}).status_code == 404


def test_flipping_a_rating_logs_each_real_change_once_and_a_repeat_changes_nothing(
    node: str, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stored, asked = "How do I clear my browser cache?", "How can I clear my browser cache?"
    hit = _semantic_hit(node, stored, asked, key="key-d")

    def log_rows() -> int:
        with contextlib.closing(sqlite3.connect(str(data_dir / "cache.db"))) as db:
            return int(db.execute("SELECT count(*) FROM budget_log WHERE tenant = 'team-d'").fetchone()[0])

    def moves() -> int:
        lines = [r.getMessage() for r in caplog.records if r.name == "edge.cache.feedback"]
        return sum(1 for line in lines if "tenant team-d " in line)

    with caplog.at_level(logging.INFO, logger="edge.cache.feedback"):
        first = rate(node, "key-d", {"id": hit.id, "rating": "wrong"})
        assert (first.status_code, log_rows(), moves()) == (200, 1, 1)
        rated_at = first.json()["rated_at"]
        for _ in range(5):  # the same rating again: nothing moves, nothing is written
            same = rate(node, "key-d", {"id": hit.id, "rating": "wrong"})
            assert (same.status_code, same.json()["rated_at"], log_rows(), moves()) == (200, rated_at, 1, 1)
        for flip in range(1, 100):  # 99 more real changes, each sent twice
            rating = "right" if flip % 2 else "wrong"
            assert rate(node, "key-d", {"id": hit.id, "rating": rating}).status_code == 200
            assert rate(node, "key-d", {"id": hit.id, "rating": rating}).status_code == 200
        # Every real change moved the threshold (wrong: above the hit; right: back): one row, one line each.
        assert (log_rows(), moves()) == (100, 100)


# Last on this node: its mangled keys trip the per-address throttle of wrong keys for a minute.
def test_feedback_fuzzed_on_a_node_with_its_cache_on(node: str) -> None:
    """schemathesis on /v1/feedback with a tenant key, where ratings are really stored: no 5xx,
    every answer as documented (the node-wide run has the cache off: there it is a 503)."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis import GenerationMode
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_url(node + "/openapi/openapi.json")
    op = schema["/v1/feedback"]["POST"]
    statuses: list[int] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @given(case=op.as_strategy(generation_mode=mode))
        @settings(max_examples=60, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
        def fuzz(case: object) -> None:
            response = case.call_and_validate(  # type: ignore[attr-defined]
                base_url=node, headers={"authorization": "Bearer key-b"},
                checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                        response_schema_conformance], timeout=30,
            )
            statuses.append(response.status_code)

        fuzz()
    # 401: a mangled key; 429: after enough of them the address is throttled, as documented.
    assert set(statuses) <= {200, 400, 401, 404, 429} and 404 in statuses and 400 in statuses


def test_a_node_with_its_cache_off_knows_no_answer(keyed_node: str) -> None:
    r = httpx.post(keyed_node + "/v1/feedback", json={"id": "chatcmpl-x", "rating": "right"},
                   headers={"authorization": "Bearer key-a"}, timeout=30)
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["param"]) == (404, "not_found", "id")
