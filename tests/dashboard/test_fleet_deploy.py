"""The shipped Prometheus files pass promtool, and the Grafana dashboard is what its builder writes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from promkit import promtool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool()), *map(str, args)], cwd=cwd, check=False, capture_output=True, text=True, timeout=120
    )


def test_rules_pass_promtool_check() -> None:
    done = run("check", "rules", "edgeroute-rules.yml", cwd=DEPLOY / "prometheus")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_rules_unit_tests_pass() -> None:
    done = run("test", "rules", "edgeroute-rules.test.yml", cwd=DEPLOY / "prometheus")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_rule_unit_test_can_fail(tmp_path: Path) -> None:
    """The rule tests would catch a broken rule: a node-down alert that never fires fails them."""
    for name in ("edgeroute-rules.yml", "edgeroute-rules.test.yml"):
        shutil.copy(DEPLOY / "prometheus" / name, tmp_path / name)
    rules = tmp_path / "edgeroute-rules.yml"
    rules.write_text(rules.read_text().replace('up{job="edgeroute"} == 0', 'up{job="edgeroute"} == 2'))
    done = run("test", "rules", "edgeroute-rules.test.yml", cwd=tmp_path)
    assert done.returncode == 1
    assert "EdgerouteNodeDown" in done.stdout + done.stderr


def test_scrape_config_passes_promtool_check(tmp_path: Path) -> None:
    for name in ("prometheus.yml", "edgeroute-rules.yml"):
        shutil.copy(DEPLOY / "prometheus" / name, tmp_path / name)
    # The files the config names, as an operator puts them next to it.
    (tmp_path / "edgeroute-operator-key").write_text("an-operator-key\n")
    (tmp_path / "edgeroute-ca.pem").write_text("placeholder\n")
    done = run("check", "config", "prometheus.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is valid prometheus config file syntax" in done.stdout


def test_grafana_dashboard_is_the_builders_output() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_dashboard", DEPLOY / "grafana" / "build_dashboard.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (DEPLOY / "grafana" / "edgeroute-fleet.json").read_text() == module.render()


def test_scrape_config_check_fails_without_the_key_file(tmp_path: Path) -> None:
    for name in ("prometheus.yml", "edgeroute-rules.yml"):
        shutil.copy(DEPLOY / "prometheus" / name, tmp_path / name)
    (tmp_path / "edgeroute-ca.pem").write_text("placeholder\n")
    done = run("check", "config", "prometheus.yml", cwd=tmp_path)
    assert done.returncode == 1
    assert "edgeroute-operator-key" in done.stdout + done.stderr
