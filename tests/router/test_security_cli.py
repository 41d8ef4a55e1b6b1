"""`edgeroute serve` as an operator runs it: no key in a config error, no open node on the network."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.nodeproc import node_process, run_edgeroute

KEY = "sk-never-print-me-7d2e"


def test_a_config_error_never_prints_a_key(tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    # Three wrong things, each with a key in it: a tenant that is not a string, a misspelt field
    # holding keys, a key where a field name should be, and an empty operator key.
    config.write_text(
        f'[server]\nport = "x"\napi_keys = {{ "{KEY}" = 5 }}\napikeys = {{ "{KEY}-2" = "t" }}\n'
        f'"{KEY}-3" = "t"\noperator_keys = ["{KEY}-4", ""]\n'
    )
    out = run_edgeroute("serve", "--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 2
    assert KEY not in out.stderr + out.stdout
    # Still says what and where: the field, with the key replaced.
    assert "server.port" in out.stderr
    assert "server.api_keys.<key>: Input should be a valid string" in out.stderr
    assert "server.apikeys: Extra inputs are not permitted" in out.stderr  # a typo is named
    assert "server.<a name not shown>: Extra inputs are not permitted" in out.stderr
    assert "an operator key may not be empty" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "d").exists()


def test_a_bad_key_in_the_environment_is_not_printed(tmp_path: Path) -> None:
    env = {"EDGEROUTE_SERVER__API_KEYS": f'{{"{KEY}": ["not", "a", "tenant"]}}'}
    out = run_edgeroute("serve", "--data-dir", str(tmp_path / "d"), env=env)
    assert out.returncode == 2 and KEY not in out.stderr + out.stdout
    assert "server.api_keys.<key>" in out.stderr
    env = {"EDGEROUTE_SERVER__OPERATOR_KEYS": f'["{KEY}", 7'}  # not JSON: says so, not the value
    out = run_edgeroute("serve", "--data-dir", str(tmp_path / "d"), env=env)
    assert out.returncode == 2 and KEY not in out.stderr + out.stdout
    assert "operator_keys is neither a JSON list nor comma-separated keys" in out.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_a_non_loopback_address_without_keys_is_refused(tmp_path: Path, host: str) -> None:
    # 192.0.2.10 (TEST-NET) is on no interface here: the refusal comes before any bind.
    out = run_edgeroute("serve", "--host", host, "--port", "0", "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 2
    assert f"refusing to serve {host} with no API keys" in out.stderr
    assert "--insecure-no-auth" in out.stderr and "server.operator_keys" in out.stderr
    assert not (tmp_path / "d").exists()  # refused before the node built anything


@pytest.mark.slow
def test_insecure_no_auth_serves_all_interfaces_and_says_so(tmp_path: Path) -> None:
    # Bound to 0.0.0.0 for a few seconds; only loopback talks to it.
    args = ("--insecure-no-auth", "--no-local-member", "--data-dir", str(tmp_path / "d"))
    env = {"EDGEROUTE_CACHE__ENABLED": "false"}
    with node_process(*args, host="0.0.0.0", env=env, log_path=tmp_path / "node.log") as node:
        assert httpx.get(f"{node.base}/healthz").status_code == 200
        assert httpx.get(f"{node.base}/v1/models").status_code == 200  # no keys: open
        assert "--insecure-no-auth: serving 0.0.0.0 with no API keys" in node.log()
