"""Speed-aware routing: each side's speed models, the objective over the proposal, and the sooner end under load."""

from __future__ import annotations

import dataclasses

import pytest

from router.policy import Decision, Features, RoutingSettings, SpeedModels, build_policy, decide
from router.policy.policies import HybridPolicy, LengthPolicy
from router.policy.speed import Prediction, SideModel, TimeModel
from router.telemetry import DecisionEvent, TelemetrySettings
from router.telemetry.aggregate import Aggregator, prediction_error

IDLE = Features(
    prompt_tokens=100, max_tokens=None, complexity=0.2, edge_running=0, edge_waiting=0, edge_max_queue=32,
    fits_edge_context=True, cloud_healthy=1, cloud_outstanding=0, cloud_ttft_ms=None, hint="auto", private=False,
)
POLICY = HybridPolicy(threshold=0.5, length=LengthPolicy(), ttft_slo_s=1.0)


def feat(**changes: object) -> Features:
    return dataclasses.replace(IDLE, **changes)


# --- the model ------------------------------------------------------------------------------------


def test_no_prediction_before_enough_answers() -> None:
    model = TimeModel(min_samples=4)
    for i in range(3):
        model.observe((float(i), 0.0), 0.1)
        assert model.predict((1.0, 0.0)) is None
    model.observe((3.0, 0.0), 0.1)
    assert model.predict((1.0, 0.0)) == pytest.approx(0.1, abs=1e-3)
    assert model.samples == 4


def test_a_linear_side_is_learnt_and_extrapolated() -> None:
    """0.05 s + 1 ms per prompt token + 0.4 s per request ahead: predicted within a percent."""
    model = TimeModel(min_samples=12)
    for tokens in (20, 80, 150, 300, 600):
        for ahead in (0, 1, 2, 3):
            model.observe((float(tokens), float(ahead)), 0.05 + 0.001 * tokens + 0.4 * ahead)
    assert model.predict((400.0, 0.0)) == pytest.approx(0.45, rel=0.01)
    assert model.predict((100.0, 5.0)) == pytest.approx(2.15, rel=0.01)


def test_a_prediction_is_never_below_the_fastest_answer_seen() -> None:
    model = TimeModel(min_samples=3)
    for tokens, seconds in ((100.0, 0.30), (200.0, 0.40), (300.0, 0.50)):
        model.observe((tokens,), seconds)
    assert model.predict((0.0,)) == pytest.approx(0.30)


def test_the_fit_minimises_the_relative_error() -> None:
    """Ten answers of 0.1 s and two of 1 s in one state: the relative-error optimum
    sum(1/y) / sum(1/y^2) = 102 / 1002, not the mean 0.25 s a plain least-squares fit gives."""
    model = TimeModel(min_samples=12)
    for seconds in [0.1] * 10 + [1.0] * 2:
        model.observe((1.0,), seconds)
    assert model.predict((1.0,)) == pytest.approx(102 / 1002, rel=0.01)


def test_the_window_forgets_old_answers() -> None:
    model = TimeModel(window=20, min_samples=5)
    for _ in range(20):
        model.observe((1.0,), 3.0)
    for _ in range(20):
        model.observe((1.0,), 0.2)
    assert model.predict((1.0,)) == pytest.approx(0.2, abs=1e-3)


def test_a_side_learns_its_pace_per_token_beside_its_first_token() -> None:
    side = SideModel()
    for running in range(12):
        # first token 0.1 s + 0.1 s per request decoding; then 10 ms per token + 5 ms per request
        first, per_token = 0.1 + 0.1 * running, 0.01 + 0.005 * running
        side.observe((float(running),), first, first + per_token * 40, 41)
    side.observe((0.0,), 0.1, 0.1, 1)  # a one-token answer has no pace: only its first token counts
    assert side.first.samples == 13 and side.per_token.samples == 12
    p = side.predict((4.0,), 101)
    assert p is not None
    assert p.first_s == pytest.approx(0.5, rel=0.02)
    assert p.done_s == pytest.approx(0.5 + 0.03 * 100, rel=0.02)
    assert SideModel().predict((4.0,), 101) is None


def test_the_cloud_is_its_soonest_member_and_unknown_while_one_is_untimed() -> None:
    speed = SpeedModels()
    for depth in range(12):
        first_a, first_b = 0.2 + 0.5 * depth, 0.1 + 0.1 * depth
        speed.member("a").observe(SpeedModels.member_state(50, depth, 0), first_a, first_a + 0.9, 10)
        speed.member("b").observe(SpeedModels.member_state(50, depth, 0), first_b, first_b + 9.0, 10)
    best = speed.cloud(50, [("a", 0), ("b", 4)], 0, 10)
    assert best is not None
    assert best.first_s == pytest.approx(0.2, abs=1e-2)  # a's first token
    assert best.done_s == pytest.approx(1.1, abs=1e-2)  # and a's end: b paces 1 s per token
    # each the soonest of any member: b's first token, a's end
    assert speed.cloud(50, [("a", 2), ("b", 4)], 0, 10) == Prediction(pytest.approx(0.5, abs=1e-2), pytest.approx(2.1, abs=1e-2))  # type: ignore[arg-type]
    assert speed.cloud(50, [("a", 0), ("c", 0)], 0, 10) is None


# --- the rule -------------------------------------------------------------------------------------


def test_unknown_or_fast_sides_leave_the_proposal_alone() -> None:
    assert decide(POLICY, feat()) == Decision("edge", "simple", 0.2)
    assert decide(POLICY, feat(edge_ttft_s=3.0)) == Decision("edge", "simple", 0.2)  # cloud unknown
    assert decide(POLICY, feat(edge_ttft_s=0.4, cloud_ttft_s=0.2)) == Decision("edge", "simple", 0.2)
    assert decide(POLICY, feat(complexity=0.9, edge_ttft_s=0.1, cloud_ttft_s=0.9)) == Decision("cloud", "complex", 0.9)


def test_a_side_that_would_miss_the_objective_gives_way_to_one_that_meets_it() -> None:
    assert decide(POLICY, feat(edge_ttft_s=1.4, cloud_ttft_s=0.9)) == Decision("cloud", "edge-slow", 0.2)
    assert decide(POLICY, feat(complexity=0.9, edge_ttft_s=0.5, cloud_ttft_s=2.5)) == Decision("edge", "cloud-slow", 0.9)
    long_prompt = feat(prompt_tokens=900, complexity=None, edge_ttft_s=0.8, cloud_ttft_s=1.2)
    assert decide(POLICY, long_prompt) == Decision("edge", "cloud-slow", pytest.approx(900 / 512))


def test_when_neither_meets_it_the_sooner_side_answers() -> None:
    assert decide(POLICY, feat(edge_ttft_s=3.0, cloud_ttft_s=2.0)) == Decision("cloud", "edge-slow", 0.2)
    assert decide(POLICY, feat(edge_ttft_s=2.0, cloud_ttft_s=3.0)) == Decision("edge", "simple", 0.2)


def test_hard_rules_and_a_saturated_edge_stay_above_the_objective() -> None:
    assert decide(POLICY, feat(private=True, edge_ttft_s=5.0, cloud_ttft_s=0.1)) == Decision("edge", "private", 0.2)
    assert decide(POLICY, feat(hint="edge", edge_ttft_s=5.0, cloud_ttft_s=0.1)) == Decision("edge", "hint-edge", 0.2)
    saturated = feat(edge_waiting=4, edge_ttft_s=0.5, cloud_ttft_s=4.0)
    assert decide(POLICY, saturated) == Decision("cloud", "edge-saturated", 0.2)
    unhealthy = feat(cloud_healthy=0, edge_ttft_s=5.0, cloud_ttft_s=None)
    assert decide(POLICY, unhealthy) == Decision("edge", "simple", 0.2)


BUSY = feat(cloud_outstanding=3, edge_ttft_s=0.3, cloud_ttft_s=0.4, edge_done_s=4.0, cloud_done_s=2.5)


def test_under_load_an_easy_prompt_goes_to_the_side_that_ends_it_sooner() -> None:
    assert decide(POLICY, BUSY) == Decision("cloud", "edge-later", 0.2)
    assert decide(POLICY, dataclasses.replace(BUSY, cloud_outstanding=0, edge_running=1)) == Decision("cloud", "edge-later", 0.2)
    # the edge ends it sooner, or the cloud's end is not known yet
    assert decide(POLICY, dataclasses.replace(BUSY, cloud_done_s=4.5)) == Decision("edge", "simple", 0.2)
    assert decide(POLICY, dataclasses.replace(BUSY, edge_done_s=None)) == Decision("edge", "simple", 0.2)


def test_the_sooner_end_moves_nothing_idle_nor_to_a_cloud_that_misses_the_objective() -> None:
    idle = dataclasses.replace(BUSY, cloud_outstanding=0)
    assert decide(POLICY, idle) == Decision("edge", "simple", 0.2)
    assert decide(POLICY, dataclasses.replace(BUSY, cloud_ttft_s=1.2)) == Decision("edge", "simple", 0.2)
    # a complex prompt stays on the cloud however soon the edge would end it
    assert decide(POLICY, dataclasses.replace(BUSY, complexity=0.9, edge_done_s=0.5)) == Decision("cloud", "complex", 0.9)
    assert decide(POLICY, dataclasses.replace(BUSY, private=True)) == Decision("edge", "private", 0.2)


YIELDS = feat(edge_yields=True, cloud_outstanding=2, edge_ttft_s=0.2, cloud_ttft_s=2.0, edge_done_s=1.0, cloud_done_s=5.0)


def test_an_edge_on_the_members_cores_yields_them_under_load() -> None:
    # whatever the predictions say: the two engines on the same cores would stall each other
    assert decide(POLICY, YIELDS) == Decision("cloud", "edge-yields", 0.2)
    assert decide(POLICY, dataclasses.replace(YIELDS, cloud_outstanding=0, edge_running=1)) == Decision("cloud", "edge-yields", 0.2)
    assert decide(POLICY, dataclasses.replace(YIELDS, complexity=0.9)) == Decision("cloud", "complex", 0.9)  # not cloud-slow
    # idle, the complexity score decides; the hard rules and a cloud that is down still send it to the edge
    assert decide(POLICY, dataclasses.replace(YIELDS, cloud_outstanding=0)) == Decision("edge", "simple", 0.2)
    assert decide(POLICY, dataclasses.replace(YIELDS, private=True)) == Decision("edge", "private", 0.2)
    assert decide(POLICY, dataclasses.replace(YIELDS, cloud_healthy=0)) == Decision("edge", "cloud-unhealthy", 0.2)


def test_the_objective_is_a_routing_setting() -> None:
    assert build_policy(RoutingSettings()).ttft_slo_s == 1.0  # type: ignore[attr-defined]
    policy = build_policy(RoutingSettings(ttft_slo_s=2.5))
    assert decide(policy, feat(edge_ttft_s=2.0, cloud_ttft_s=0.1)) == Decision("edge", "simple", 0.2)
    with pytest.raises(ValueError, match="ttft_slo_s"):
        RoutingSettings(ttft_slo_s=0)


# --- the error the dashboard shows ----------------------------------------------------------------


def event(route: str = "edge", ttft_ms: float | None = 500.0, **changes: object) -> DecisionEvent:
    base: dict[str, object] = dict(
        ts=0.0, request_id="r", tenant="t", model="auto", route=route, reason="simple", stream=True,
        ttft_ms=ttft_ms, features={"edge_ttft_s": 0.4, "cloud_ttft_s": 1.0},
    )
    base.update(changes)
    return DecisionEvent(**base)  # type: ignore[arg-type]


def test_the_prediction_error_is_of_the_side_that_answered() -> None:
    assert prediction_error(event()) == pytest.approx(0.2)
    assert prediction_error(event("cloud", 800.0)) == pytest.approx(0.25)
    assert prediction_error(event(stream=False)) is None
    assert prediction_error(event(fallback="edge->cloud")) is None
    assert prediction_error(event("cache-exact")) is None
    assert prediction_error(event(features={})) is None
    assert prediction_error(event(status="error", error="x")) is None


def test_the_snapshot_carries_the_median_prediction_error() -> None:
    agg = Aggregator(TelemetrySettings(), lambda: 1000.0)
    assert agg.snapshot().ttft_prediction_error is None
    for ttft in (400.0, 500.0, 800.0):  # errors 0, 0.2, 0.5
        agg.add(event(ttft_ms=ttft))
    agg.add(event("cache-exact"))
    err = agg.snapshot().ttft_prediction_error
    assert err is not None and err.count == 3
    assert err.p50 == pytest.approx(0.2) and err.p95 == pytest.approx(0.5)
