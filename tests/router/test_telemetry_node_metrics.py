"""What a fleet's Prometheus reads from a node: who it is, whether it drains, what it spent."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from litestar.datastructures import State

from router.settings import ServerSettings, Settings
from router.telemetry import DecisionEvent, Telemetry, TelemetrySettings
from router.telemetry.sources import NodeInfo
from router.telemetry.config import PriceSettings
from router.telemetry.http import node_info
from tests.router.test_telemetry_metrics import samples


def event(route: str, prompt: int, completion: int, status: str = "ok") -> DecisionEvent:
    return DecisionEvent(
        ts=time.time(),
        request_id="r",
        tenant="t",
        model="auto",
        route=route,
        reason="why",
        prompt_tokens=prompt,
        completion_tokens=completion,
        status=status,
    )


def test_node_info_and_draining_are_exported(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetrySettings(enabled=False), tmp_path)
    info = NodeInfo("store-7", "smollm2-135m-q4_1", "0123456789ab", "0.1.0", "/dashboard", draining=True)
    got = samples(telemetry.metrics.render(node=info).decode())
    labels = (
        ("dashboard_path", "/dashboard"),
        ("edge_model", "smollm2-135m-q4_1"),
        ("edge_model_version", "0123456789ab"),
        ("node", "store-7"),
        ("version", "0.1.0"),
    )
    assert got[("edgeroute_node_info", labels)] == 1.0
    assert got[("edgeroute_node_draining", ())] == 1.0


def test_no_node_no_info(tmp_path: Path) -> None:
    text = Telemetry(TelemetrySettings(enabled=False), tmp_path).metrics.render().decode()
    assert "edgeroute_node_info" not in text
    assert "edgeroute_node_draining" not in text


def test_spend_counters_follow_the_prices(tmp_path: Path) -> None:
    prices = PriceSettings(
        currency="EUR", cloud_prompt_per_1k=1.0, cloud_completion_per_1k=2.0, edge_per_1k=0.5
    )
    telemetry = Telemetry(TelemetrySettings(enabled=False, prices=prices), tmp_path)
    telemetry.record(event("cloud", 1000, 500))  # spent 1 + 1 = 2; all-cloud 2
    telemetry.record(event("edge", 1000, 1000))  # spent 2000 tokens * 0.5/1k = 1; all-cloud 1 + 2 = 3
    telemetry.record(event("cache-exact", 1000, 1000))  # spent 0; all-cloud 3
    telemetry.record(event("cloud", 1000, 1000, status="error"))  # failed: on neither side
    got = samples(telemetry.metrics.render().decode())
    assert got[("edgeroute_spend_total", (("currency", "EUR"),))] == pytest.approx(3.0)
    assert got[("edgeroute_spend_all_cloud_total", (("currency", "EUR"),))] == pytest.approx(8.0)


def test_node_info_reads_the_node_settings_and_drain() -> None:
    settings = Settings(server=ServerSettings(node_name="factory-2"))
    spec = SimpleNamespace(alias="smollm2", sha256="ffeeddccbbaa99887766")
    state = State(
        {
            "node": SimpleNamespace(settings=settings, edge=SimpleNamespace(spec=spec)),
            "drain": SimpleNamespace(draining=False),
        }
    )
    info = node_info(state)
    assert info is not None
    assert (info.name, info.edge_model, info.edge_model_version) == ("factory-2", "smollm2", "ffeeddccbbaa")
    assert (info.dashboard_path, info.draining) == ("/dashboard", False)
    state.drain.draining = True
    assert node_info(state).draining is True  # type: ignore[union-attr]
    assert node_info(State({})) is None


def test_node_name_defaults_to_the_host_name_and_is_checked() -> None:
    import socket

    assert ServerSettings().node_name == socket.gethostname()
    with pytest.raises(ValueError, match="node_name"):
        ServerSettings(node_name="")
