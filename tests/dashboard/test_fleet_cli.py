"""`edgeroute dashboard --prometheus URL`: what it refuses before serving anything."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from edgeroute.cli import app


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["dashboard", *args])
    return result.exit_code, result.output


def test_refuses_an_open_address_without_operator_keys() -> None:
    code, out = invoke("--prometheus", "http://127.0.0.1:9090", "--host", "0.0.0.0")
    assert code == 2
    assert "refusing to serve 0.0.0.0 with no operator key" in out


def test_names_the_bad_option() -> None:
    code, out = invoke("--prometheus", "http://127.0.0.1:9090", "--window", "five minutes")
    assert code == 2
    assert "window:" in out
    code, out = invoke("--prometheus", "not a url")
    assert code == 2
    assert "prometheus_url:" in out


def test_a_bad_config_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[server]\noperator_keys = ['']\n")
    code, out = invoke("--prometheus", "http://127.0.0.1:9090", "--config", str(config))
    assert code == 2
    assert "server.operator_keys" in out
