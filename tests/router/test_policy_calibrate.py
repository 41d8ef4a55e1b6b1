"""Calibration of the complexity threshold, and replay of logged decisions under another threshold."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pysqlite3 as sqlite3
import pytest
from typer.testing import CliRunner

from edgeroute.cli import app
from router.errors import ConfigError
from router.policy import Features, RoutingSettings, build_policy
from router.training.calibrate import logged_scores, threshold_for_share
from router.telemetry import DecisionEvent
from router.telemetry.config import PriceSettings
from router.training.replay import first_hop, read_decisions_db, replay

TEN = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]


def test_threshold_sits_between_the_last_cloud_and_the_first_edge_score() -> None:
    cal = threshold_for_share(TEN, 0.3)
    assert cal.threshold == pytest.approx(0.65)
    assert (cal.achieved_share, cal.target_share, cal.n) == (0.3, 0.3, 10)


def test_threshold_ignores_input_order() -> None:
    assert threshold_for_share(list(reversed(TEN)), 0.7).threshold == pytest.approx(0.25)


def test_share_zero_sends_nothing_to_the_cloud() -> None:
    cal = threshold_for_share(TEN, 0.0)
    assert cal.threshold == math.nextafter(0.9, math.inf)
    assert cal.achieved_share == 0.0


def test_share_one_sends_everything_to_the_cloud() -> None:
    cal = threshold_for_share(TEN, 1.0)
    assert (cal.threshold, cal.achieved_share) == (0.0, 1.0)


def test_ties_are_reported_in_the_achieved_share() -> None:
    cal = threshold_for_share([0.5, 0.5, 0.5, 0.5], 0.5)
    assert (cal.threshold, cal.achieved_share) == (0.5, 1.0)


@pytest.mark.parametrize(("scores", "share"), [([0.1], 1.5), ([0.1], -0.1), ([], 0.3), ([1.2], 0.3)])
def test_bad_calibration_input_is_a_config_error(scores: list[float], share: float) -> None:
    with pytest.raises(ConfigError):
        threshold_for_share(scores, share)


# --- logged traffic -------------------------------------------------------------------------------

BASE = Features(
    prompt_tokens=20,
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


def rec(
    route: str, latency: float, ttft: float | None, prompt: int, completion: int, **feat: Any
) -> dict[str, Any]:
    features = json.dumps(dataclasses.asdict(dataclasses.replace(BASE, **feat))) if feat else None
    return {
        "route": route,
        "reason": "",
        "latency_ms": latency,
        "ttft_ms": ttft,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "features": features,
        "fallback": None,
    }


def event(row: dict[str, Any]) -> DecisionEvent:
    """The decision as the telemetry log gives it back."""
    return DecisionEvent.from_row({"ts": 0.0, "request_id": "r", "tenant": "default", "model": "auto", **row})


# Edge latency model: median TTFT 60 ms, median 11 ms/token; cloud: 250 ms TTFT, 9 ms/token.
LOG = [
    rec("edge", 400, 50, 20, 35, complexity=0.2),
    rec("edge", 500, 100, 10, 40, complexity=0.4),
    rec("cloud", 1000, 200, 50, 100, complexity=0.8),
    rec("cloud", 700, 300, 60, 40, complexity=0.6),
    rec("cache-exact", 2, None, 10, 40, complexity=0.9),
    rec("edge", 600, None, 5, 10),  # routed, but its features were not logged
    rec("edge", 300, 60, 30, 20, complexity=0.9, private=True),
]
EVENTS = [event(r) for r in LOG]
FLAT = PriceSettings(cloud_prompt_per_1k=0.002, cloud_completion_per_1k=0.002)


def hybrid(threshold: float) -> Any:
    return build_policy(RoutingSettings(complexity_threshold=threshold))


def test_replay_with_a_lower_threshold_moves_traffic_to_the_cloud() -> None:
    report = replay(EVENTS, hybrid(0.3), FLAT)
    assert (report.total, report.replayed, report.skipped) == (7, 5, 1)
    assert (report.changed, report.edge_to_cloud, report.cloud_to_edge, report.unestimated) == (1, 1, 0, 0)
    assert (report.logged.edge, report.logged.cloud) == (3, 2)
    assert (report.replay.edge, report.replay.cloud) == (2, 3)
    assert report.replay.cloud_share == pytest.approx(0.6)
    assert report.logged.latency_ms_mean == pytest.approx(580.0)
    assert report.replay.latency_ms_mean == pytest.approx(602.0)  # 500 ms on edge -> 250 + 40 * 9 on cloud
    assert (report.logged.latency_ms_p50, report.replay.latency_ms_p50) == (500.0, 610.0)
    assert report.logged.cost == pytest.approx(0.0005)
    assert report.replay.cost == pytest.approx(0.0006)
    assert report.reasons == {"complex": 3, "private": 1, "simple": 1}


def test_replay_with_a_higher_threshold_moves_traffic_to_the_edge() -> None:
    report = replay(EVENTS, hybrid(0.7), FLAT)
    assert (report.changed, report.edge_to_cloud, report.cloud_to_edge) == (1, 0, 1)
    assert report.replay.latency_ms_mean == pytest.approx((400 + 500 + 1000 + 500 + 300) / 5)  # 60 + 40 * 11
    assert report.replay.cost == pytest.approx(0.0003)


def test_replay_without_traffic_on_the_new_route_keeps_the_logged_latency() -> None:
    only_edge = [event(rec("edge", 500, 100, 10, 40, complexity=0.4))]
    report = replay(only_edge, hybrid(0.3), FLAT)
    assert (report.changed, report.unestimated, report.replay.latency_ms_mean) == (1, 1, 500.0)


@pytest.mark.parametrize(
    ("route", "fallback", "decided"),
    [
        ("edge", "cloud->edge", "cloud"),
        ("cloud", "member-a->member-b", "cloud"),
        ("cloud", "edge->cloud", "edge"),
        ("edge", None, "edge"),
        ("cache-semantic", None, None),
        ("error", None, None),
    ],
)
def test_a_logged_decision_was_decided_at_its_first_hop(route: str, fallback: str | None, decided: str | None) -> None:
    assert first_hop(event(rec(route, 1, None, 0, 0) | {"fallback": fallback})) == decided


def test_logged_scores_keep_only_what_the_threshold_governs() -> None:
    records = [*EVENTS, event(rec("cloud", 900, 90, 10, 10, complexity=0.7, hint="cloud"))]
    assert logged_scores(records) == [0.2, 0.4, 0.8, 0.6]


# --- the telemetry database and the CLI -----------------------------------------------------------

SCHEMA = """CREATE TABLE decisions (
    id INTEGER PRIMARY KEY, ts REAL, request_id TEXT, tenant TEXT, model TEXT, route TEXT, reason TEXT,
    fallback TEXT, degraded TEXT, status TEXT, error TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    latency_ms REAL, ttft_ms REAL, similarity REAL, complexity REAL, member TEXT, stream INTEGER,
    private INTEGER, prompt_preview TEXT, features TEXT)"""


def write_db(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path))
    conn.execute(SCHEMA)
    for i, r in enumerate(rows):
        conn.execute(
            "INSERT INTO decisions (ts, request_id, tenant, model, route, reason, fallback, status,"
            " prompt_tokens, completion_tokens, latency_ms, ttft_ms, stream, private, prompt_preview,"
            " features)"
            " VALUES (?, ?, 'default', 'auto', ?, ?, ?, 'ok', ?, ?, ?, ?, 1, 0, '', ?)",
            (
                1000.0 + i,
                f"req-{i}",
                r["route"],
                r["reason"],
                r["fallback"],
                r["prompt_tokens"],
                r["completion_tokens"],
                r["latency_ms"],
                r["ttft_ms"],
                r["features"],
            ),
        )
    conn.commit()
    conn.close()


def test_read_decisions_db_reads_the_contract_table_oldest_first(tmp_path: Path) -> None:
    write_db(tmp_path / "telemetry.db", LOG)
    records = read_decisions_db(tmp_path / "telemetry.db")
    assert [r.route for r in records] == [r["route"] for r in LOG]
    assert [r.latency_ms for r in read_decisions_db(tmp_path / "telemetry.db", limit=2)] == [600.0, 300.0]


def test_read_decisions_db_without_a_database_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no telemetry database"):
        read_decisions_db(tmp_path / "missing.db")


def test_cli_replay_reads_telemetry_from_the_data_dir(tmp_path: Path) -> None:
    write_db(tmp_path / "telemetry.db", LOG)
    runner = CliRunner()
    result = runner.invoke(
        app, ["router", "replay", "--threshold", "0.3", "--data-dir", str(tmp_path), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["threshold"] == 0.3
    assert (report["changed"], report["edge_to_cloud"], report["replay"]["cloud"]) == (1, 1, 3)
    assert report["replay"]["cloud_share"] == pytest.approx(0.6)

    table = runner.invoke(app, ["router", "replay", "--threshold", "0.3", "--data-dir", str(tmp_path)])
    assert table.exit_code == 0, table.output
    assert "cloud share            40.0%     60.0%    +20.0 pp" in table.stdout
    assert "changed decisions: 1 (edge->cloud 1, cloud->edge 0)" in table.stdout


def test_cli_replay_reads_the_decision_log_the_node_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The node writes to <data dir>/<telemetry.db_file>; the replay must read that file.
    write_db(tmp_path / "decisions.db", LOG)
    monkeypatch.setenv("EDGEROUTE_TELEMETRY__DB_FILE", "decisions.db")
    result = CliRunner().invoke(
        app, ["router", "replay", "--threshold", "0.3", "--data-dir", str(tmp_path), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["replay"]["cloud"] == 3


def test_cli_calibrate_from_telemetry(tmp_path: Path) -> None:
    write_db(tmp_path / "telemetry.db", LOG)
    result = CliRunner().invoke(
        app,
        [
            "router",
            "calibrate",
            "--target-cloud-share",
            "0.5",
            "--from-telemetry",
            "--data-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["n"], out["achieved_share"]) == (4, 0.5)
    assert out["threshold"] == pytest.approx(0.5)


def test_cli_replay_without_telemetry_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["router", "replay", "--threshold", "0.3", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no telemetry database" in result.stderr


def test_cli_calibrate_from_telemetry_without_scored_requests_exits_2(tmp_path: Path) -> None:
    write_db(tmp_path / "telemetry.db", [rec("cache-exact", 2, None, 10, 40, complexity=0.9)])
    result = CliRunner().invoke(
        app, ["router", "calibrate", "--target-cloud-share", "0.5", "--from-telemetry", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "no routed, unhinted, non-private request" in result.stderr
