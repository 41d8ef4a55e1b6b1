"""`edgeroute serve` as an operator runs it: no key in a config error, no open node on the network."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from loadtest.servers import node_process, run_edgeroute

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
    assert "operator_keys is neither a JSON list nor comma-separated items" in out.stderr


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


TENANT_KEY, OPERATOR_KEY = "sk-tenant-a-31f0", "sk-operator-9c4e"
KEYED = {
    "EDGEROUTE_SERVER__API_KEYS": json.dumps({TENANT_KEY: "team-a"}),
    "EDGEROUTE_SERVER__OPERATOR_KEYS": OPERATOR_KEY,
    "EDGEROUTE_SERVER__BAD_KEY_ATTEMPTS_PER_MINUTE": "5",
    "EDGEROUTE_SERVER__LOGIN_ATTEMPTS_PER_MINUTE": "3",
    "EDGEROUTE_CACHE__ENABLED": "false",
}


def _wrong_keys(base: str, n: int, forwarded: Callable[[int], str]) -> list[int]:
    """Statuses of ``n`` requests to /v1/models with a wrong key, each with its X-Forwarded-For."""
    with httpx.Client(base_url=base, timeout=30) as client:
        return [
            client.get("/v1/models", headers={"authorization": f"Bearer wrong-{i}", "x-forwarded-for": forwarded(i)}).status_code
            for i in range(n)
        ]


def _logins(base: str, n: int, forwarded: Callable[[int], str]) -> list[int]:
    with httpx.Client(base_url=base, timeout=30) as client:
        return [
            client.post("/dashboard/login", data={"key": f"wrong-{i}"}, headers={"x-forwarded-for": forwarded(i)}).status_code
            for i in range(n)
        ]


def rotating(i: int) -> str:
    return f"198.51.100.{i + 1}"


@pytest.mark.slow
def test_forwarded_addresses_are_ignored_without_trusted_proxies(tmp_path: Path) -> None:
    args = ("--no-local-member", "--data-dir", str(tmp_path / "d"))
    with node_process(*args, env=KEYED, log_path=tmp_path / "node.log") as node:
        # One peer, a new X-Forwarded-For each time: the limit counts the peer, as with no header.
        assert _wrong_keys(node.base, 40, rotating) == [401] * 5 + [429] * 35
        refused = httpx.get(f"{node.base}/v1/models", headers={"authorization": f"Bearer {TENANT_KEY}"})
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert _logins(node.base, 13, rotating) == [401] * 3 + [429] * 10


@pytest.mark.slow
def test_a_trusted_proxy_names_the_client(tmp_path: Path) -> None:
    args = ("--no-local-member", "--data-dir", str(tmp_path / "d"))
    env = {**KEYED, "EDGEROUTE_SERVER__TRUSTED_PROXIES": "127.0.0.1"}
    with node_process(*args, env=env, log_path=tmp_path / "node.log") as node:
        # Each forwarded client has its own count ...
        assert _wrong_keys(node.base, 40, rotating) == [401] * 40
        # ... and one of them is limited on its own, the proxy's other clients not.
        assert _wrong_keys(node.base, 7, lambda i: "203.0.113.7") == [401] * 5 + [429] * 2
        assert _wrong_keys(node.base, 1, lambda i: "203.0.113.8") == [401]
        assert _logins(node.base, 4, lambda i: "203.0.113.9") == [401] * 3 + [429]
        assert _logins(node.base, 1, lambda i: "203.0.113.10") == [401]
