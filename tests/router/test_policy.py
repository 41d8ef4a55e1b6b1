"""The routing policies are pure functions of Features: exact decisions, reasons and scores."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from router.errors import ConfigError
from router.policy import Decision, Features, RoutingSettings, build_policy, decide
from router.policy.features import features_from_dict
from router.policy.policies import ComplexityPolicy, HybridPolicy, LengthPolicy
from router.settings import load_settings

IDLE = Features(
    prompt_tokens=100,
    max_tokens=None,
    complexity=0.2,
    edge_running=0,
    edge_waiting=0,
    edge_max_queue=32,
    fits_edge_context=True,
    cloud_healthy=2,
    cloud_outstanding=0,
    cloud_ttft_ms=None,
    hint="auto",
    private=False,
)


def feat(**changes: object) -> Features:
    return dataclasses.replace(IDLE, **changes)


LENGTH = LengthPolicy(long_prompt_tokens=512, long_max_tokens=512)
COMPLEXITY = ComplexityPolicy(threshold=0.5, length=LENGTH)
HYBRID = HybridPolicy(
    threshold=0.5, length=LENGTH, edge_queue_bound=4, edge_pressure=0.15, cloud_pressure=0.15
)
ALL = [LENGTH, COMPLEXITY, HYBRID]


# --- length ---------------------------------------------------------------------------------------


def test_length_short_prompt_stays_on_edge() -> None:
    assert decide(LENGTH, feat(prompt_tokens=128)) == Decision("edge", "short-prompt", 0.25)


def test_length_prompt_at_the_bound_stays_on_edge() -> None:
    assert decide(LENGTH, feat(prompt_tokens=512)) == Decision("edge", "short-prompt", 1.0)


def test_length_long_prompt_goes_to_cloud() -> None:
    assert decide(LENGTH, feat(prompt_tokens=1024)) == Decision("cloud", "long-prompt", 2.0)


def test_length_long_output_goes_to_cloud() -> None:
    assert decide(LENGTH, feat(prompt_tokens=64, max_tokens=768)) == Decision("cloud", "long-output", 1.5)


def test_length_ignores_complexity() -> None:
    assert decide(LENGTH, feat(prompt_tokens=256, complexity=0.99)) == Decision("edge", "short-prompt", 0.5)


# --- hard rules, the same in every policy ---------------------------------------------------------


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_private_stays_on_edge_whatever_else(policy: object) -> None:
    f = feat(private=True, hint="cloud", prompt_tokens=4000, complexity=0.99, fits_edge_context=False)
    assert decide(policy, f).target == "edge"  # type: ignore[arg-type]
    assert decide(policy, f).reason == "private"  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_hint_edge_wins_over_length_and_complexity(policy: object) -> None:
    d = decide(policy, feat(hint="edge", prompt_tokens=900, complexity=0.95))  # type: ignore[arg-type]
    assert (d.target, d.reason) == ("edge", "hint-edge")


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_hint_cloud_wins_over_a_simple_prompt(policy: object) -> None:
    d = decide(policy, feat(hint="cloud", complexity=0.01))  # type: ignore[arg-type]
    assert (d.target, d.reason) == ("cloud", "hint-cloud")


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_hint_cloud_with_no_healthy_member_answers_edge_degraded(policy: object) -> None:
    d = decide(policy, feat(hint="cloud", cloud_healthy=0))  # type: ignore[arg-type]
    assert (d.target, d.reason) == ("edge", "cloud-unhealthy")


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_prompt_too_big_for_edge_context_goes_to_cloud(policy: object) -> None:
    d = decide(policy, feat(fits_edge_context=False, complexity=0.01))  # type: ignore[arg-type]
    assert (d.target, d.reason) == ("cloud", "edge-context")


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_cloud_down_turns_every_cloud_choice_into_edge(policy: object) -> None:
    d = decide(policy, feat(prompt_tokens=2000, complexity=0.99, cloud_healthy=0))  # type: ignore[arg-type]
    assert (d.target, d.reason) == ("edge", "cloud-unhealthy")


# --- complexity -----------------------------------------------------------------------------------


def test_complexity_above_threshold_goes_to_cloud() -> None:
    assert decide(COMPLEXITY, feat(complexity=0.7)) == Decision("cloud", "complex", 0.7)


def test_complexity_below_threshold_stays_on_edge() -> None:
    assert decide(COMPLEXITY, feat(complexity=0.3)) == Decision("edge", "simple", 0.3)


def test_complexity_at_threshold_goes_to_cloud() -> None:
    assert decide(COMPLEXITY, feat(complexity=0.5)) == Decision("cloud", "complex", 0.5)


def test_complexity_ignores_load() -> None:
    busy_edge = feat(complexity=0.45, edge_running=1, edge_waiting=10)
    assert decide(COMPLEXITY, busy_edge) == Decision("edge", "simple", 0.45)


def test_complexity_without_score_falls_back_to_length() -> None:
    assert decide(COMPLEXITY, feat(complexity=None, prompt_tokens=1024)) == Decision(
        "cloud", "long-prompt", 2.0
    )
    assert decide(COMPLEXITY, feat(complexity=None, prompt_tokens=256)) == Decision(
        "edge", "short-prompt", 0.5
    )


def test_complexity_custom_threshold() -> None:
    policy = ComplexityPolicy(threshold=0.8)
    assert decide(policy, feat(complexity=0.7)) == Decision("edge", "simple", 0.7)


# --- hybrid ---------------------------------------------------------------------------------------


def test_hybrid_idle_follows_the_threshold() -> None:
    assert decide(HYBRID, feat(complexity=0.45)) == Decision("edge", "simple", 0.45)
    assert decide(HYBRID, feat(complexity=0.55)) == Decision("cloud", "complex", 0.55)


def test_hybrid_long_prompt_and_long_output_go_to_cloud_with_the_complexity_score() -> None:
    assert decide(HYBRID, feat(prompt_tokens=600, complexity=0.1)) == Decision("cloud", "long-prompt", 0.1)
    assert decide(HYBRID, feat(max_tokens=1000, complexity=0.1)) == Decision("cloud", "long-output", 0.1)


def test_hybrid_saturated_edge_sends_even_simple_prompts_to_cloud() -> None:
    f = feat(complexity=0.1, edge_running=1, edge_waiting=4)
    assert decide(HYBRID, f) == Decision("cloud", "edge-saturated", 0.1)


def test_hybrid_saturation_bound_is_capped_by_the_edge_queue() -> None:
    f = feat(complexity=0.1, edge_running=1, edge_waiting=2, edge_max_queue=2)
    assert decide(HYBRID, f) == Decision("cloud", "edge-saturated", 0.1)


def test_hybrid_saturated_edge_and_dead_cloud_stays_on_edge() -> None:
    f = feat(complexity=0.1, edge_running=1, edge_waiting=9, cloud_healthy=0)
    assert decide(HYBRID, f) == Decision("edge", "cloud-unhealthy", 0.1)


def test_hybrid_busy_edge_lowers_the_threshold() -> None:
    busy = {"edge_running": 1, "edge_waiting": 3}  # load (1 + 3) / (4 + 1) = 0.8 -> threshold 0.5 - 0.12
    assert HYBRID.effective_threshold(feat(**busy)) == pytest.approx(0.38)
    assert decide(HYBRID, feat(complexity=0.45, **busy)) == Decision("cloud", "edge-busy", 0.45)
    assert decide(HYBRID, feat(complexity=0.30, **busy)) == Decision("edge", "simple", 0.30)


def test_hybrid_busy_cloud_raises_the_threshold() -> None:
    busy = {"cloud_healthy": 2, "cloud_outstanding": 16}  # 16 / (2 * 8) = full -> threshold 0.5 + 0.15
    assert HYBRID.effective_threshold(feat(**busy)) == pytest.approx(0.65)
    assert decide(HYBRID, feat(complexity=0.6, **busy)) == Decision("edge", "cloud-busy", 0.6)
    assert decide(HYBRID, feat(complexity=0.7, **busy)) == Decision("cloud", "complex", 0.7)


def test_hybrid_slow_cloud_ttft_raises_the_threshold() -> None:
    slow = {"cloud_ttft_ms": 2250.0}  # (2250 - 1500) / 1500 = 0.5 -> threshold 0.5 + 0.075
    assert HYBRID.effective_threshold(feat(**slow)) == pytest.approx(0.575)
    assert decide(HYBRID, feat(complexity=0.56, **slow)) == Decision("edge", "cloud-busy", 0.56)
    assert decide(HYBRID, feat(complexity=0.58, **slow)) == Decision("cloud", "complex", 0.58)
    assert HYBRID.effective_threshold(feat(cloud_ttft_ms=900.0)) == pytest.approx(0.5)


def test_hybrid_loads_are_clipped_to_one() -> None:
    f = feat(edge_running=1, edge_waiting=3, cloud_outstanding=500, cloud_ttft_ms=60_000.0)
    assert HYBRID.edge_load(f) == pytest.approx(0.8)
    assert HYBRID.cloud_load(f) == 1.0
    assert HYBRID.effective_threshold(f) == pytest.approx(0.5 - 0.12 + 0.15)


def test_hybrid_without_complexity_uses_length_alone() -> None:
    assert decide(HYBRID, feat(complexity=None, prompt_tokens=256)) == Decision("edge", "short-prompt", 0.5)
    assert decide(HYBRID, feat(complexity=None, prompt_tokens=1024)) == Decision("cloud", "long-prompt", 2.0)


# --- registry and settings ------------------------------------------------------------------------


def test_build_policy_maps_every_name_with_its_settings() -> None:
    s = RoutingSettings(
        long_prompt_tokens=100, long_max_tokens=200, complexity_threshold=0.7, edge_queue_bound=2
    )
    length = build_policy(s.model_copy(update={"policy": "length"}))
    assert length == LengthPolicy(long_prompt_tokens=100, long_max_tokens=200)
    complexity = build_policy(s.model_copy(update={"policy": "complexity"}))
    assert complexity == ComplexityPolicy(threshold=0.7, length=LengthPolicy(100, 200))
    hybrid = build_policy(s.model_copy(update={"policy": " Hybrid "}))
    assert isinstance(hybrid, HybridPolicy)
    assert (hybrid.threshold, hybrid.edge_queue_bound, hybrid.length.long_prompt_tokens) == (0.7, 2, 100)


def test_default_settings_build_the_hybrid_policy() -> None:
    assert build_policy(RoutingSettings()) == HybridPolicy()


def test_unknown_policy_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        build_policy(RoutingSettings(policy="smart"))
    assert err.value.message == "unknown routing policy 'smart'; valid policies: complexity, hybrid, length"
    assert err.value.param == "routing.policy"


def test_routing_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEROUTE_ROUTING__POLICY", "complexity")
    monkeypatch.setenv("EDGEROUTE_ROUTING__COMPLEXITY_THRESHOLD", "0.62")
    routing = load_settings().routing
    assert build_policy(routing) == ComplexityPolicy(threshold=0.62)


def test_out_of_range_threshold_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEROUTE_ROUTING__COMPLEXITY_THRESHOLD", "1.5")
    with pytest.raises(ConfigError, match=r"routing\.complexity\.threshold"):
        load_settings()


def test_each_policy_has_its_own_section_and_the_flat_names_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "node.toml"
    cfg.write_text(
        "[routing]\npolicy = 'hybrid'\nedge_pressure = 0.3\n"
        "[routing.length]\nlong_prompt_tokens = 100\n[routing.complexity]\nthreshold = 0.6\n"
        "[routing.hybrid]\nedge_queue_bound = 2\n"
    )
    monkeypatch.setenv("EDGEROUTE_ROUTING__HYBRID__CLOUD_MEMBER_CAPACITY", "3")
    routing = load_settings(cfg).routing
    assert (routing.length.long_prompt_tokens, routing.complexity.threshold) == (100, 0.6)
    assert (routing.hybrid.edge_queue_bound, routing.hybrid.edge_pressure, routing.hybrid.cloud_member_capacity) == (2, 0.3, 3)
    assert build_policy(routing) == HybridPolicy(
        threshold=0.6, length=LengthPolicy(100, 512), edge_queue_bound=2, edge_pressure=0.3, cloud_member_capacity=3
    )


def test_features_round_trip_through_json_dict() -> None:
    f = feat(cloud_ttft_ms=321.5, hint="edge", max_tokens=64)
    assert features_from_dict({**dataclasses.asdict(f), "extra": 1}) == f


def test_features_from_dict_names_missing_fields() -> None:
    d = dataclasses.asdict(IDLE)
    del d["complexity"], d["private"]
    with pytest.raises(ValueError, match="logged features lack complexity, private"):
        features_from_dict(d)


# --- edge slots and the wait budget (continuous batching) ----------------------------------------


def test_hybrid_edge_load_counts_the_edge_slots() -> None:
    # 8 slots all busy, nothing waiting: (8 + 0) / (4 + 8) of the way to saturation.
    f = feat(edge_running=8, edge_waiting=0, edge_capacity=8)
    assert HYBRID.edge_load(f) == pytest.approx(8 / 12)
    assert HYBRID.decide(feat(complexity=0.1, edge_running=8, edge_capacity=8)) == Decision("edge", "simple", 0.1)


def test_hybrid_edge_wait_over_budget_goes_to_the_cloud() -> None:
    over = feat(complexity=0.1, edge_running=8, edge_waiting=1, edge_capacity=8, edge_wait_ms=2500.0)
    assert decide(HYBRID, over) == Decision("cloud", "edge-wait-over-budget", 0.1)
    within = dataclasses.replace(over, edge_wait_ms=1500.0)
    assert decide(HYBRID, within) == Decision("edge", "simple", 0.1)
    assert decide(HYBRID, dataclasses.replace(over, edge_wait_ms=None)) == Decision("edge", "simple", 0.1)
    # No healthy cloud: the edge keeps it, and says why.
    assert decide(HYBRID, dataclasses.replace(over, cloud_healthy=0)) == Decision("edge", "cloud-unhealthy", 0.1)
    # A private prompt waits on the edge whatever the budget.
    assert decide(HYBRID, dataclasses.replace(over, private=True)) == Decision("edge", "private", 0.1)


def test_wait_budget_comes_from_the_settings() -> None:
    hybrid = build_policy(RoutingSettings(hybrid={"edge_wait_budget_ms": 300.0}))
    assert isinstance(hybrid, HybridPolicy) and hybrid.edge_wait_budget_ms == 300.0
    f = feat(complexity=0.1, edge_wait_ms=301.0)
    assert decide(hybrid, f) == Decision("cloud", "edge-wait-over-budget", 0.1)


def test_features_logged_before_edge_slots_still_load() -> None:
    d = dataclasses.asdict(IDLE)
    del d["edge_capacity"], d["edge_wait_ms"]
    assert features_from_dict(d) == IDLE
