from __future__ import annotations

from pathlib import Path

import pytest

from router import load_settings
from router.errors import ConfigError


def test_defaults_work_with_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDGEROUTE_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    s = load_settings()
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8080)
    assert s.data_dir == tmp_path / "xdg" / "edgeroute"
    assert s.edge.model == "smollm2-135m-instruct"


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch, _data_dir: Path) -> None:
    monkeypatch.setenv("EDGEROUTE_SERVER__PORT", "9001")
    monkeypatch.setenv("EDGEROUTE_EDGE__N_CTX", "1024")
    s = load_settings()
    assert (s.server.port, s.edge.n_ctx, s.data_dir) == (9001, 1024, _data_dir)


def test_precedence_argument_over_file_over_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "node.toml"
    cfg.write_text('data_dir = "/from/file"\n[server]\nport = 7000\n[edge]\nmax_queue = 3\n')
    monkeypatch.setenv("EDGEROUTE_SERVER__PORT", "9001")
    monkeypatch.setenv("EDGEROUTE_EDGE__N_CTX", "1024")
    s = load_settings(cfg)
    assert (s.server.port, s.edge.max_queue, s.edge.n_ctx) == (7000, 3, 1024)
    assert s.data_dir == Path("/from/file")
    s = load_settings(cfg, data_dir=tmp_path / "arg")
    assert s.data_dir == tmp_path / "arg"


def test_missing_and_invalid_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\nport = 1")
    with pytest.raises(ConfigError, match="invalid config file"):
        load_settings(bad)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[server]\nport = -4\n")
    with pytest.raises(ConfigError, match="server.port"):
        load_settings(wrong)
    typo = tmp_path / "typo.toml"
    typo.write_text("[edg]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match="edg"):
        load_settings(typo)


def test_an_unknown_policy_fails_when_settings_load_and_lists_the_valid_ones(tmp_path: Path) -> None:
    cfg = tmp_path / "policy.toml"
    cfg.write_text("[routing]\npolicy = 'smartest'\n")
    with pytest.raises(ConfigError, match="unknown routing policy 'smartest'; valid policies: complexity, hybrid, length"):
        load_settings(cfg)
    assert load_settings(routing={"policy": "length"}).routing.policy == "length"


def test_trusted_proxies_default_to_none_and_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().server.trusted_proxies == []
    monkeypatch.setenv("EDGEROUTE_SERVER__TRUSTED_PROXIES", "127.0.0.1, 10.1.2.3/8,::1")
    assert load_settings().server.trusted_proxies == ["127.0.0.1", "10.0.0.0/8", "::1"]
    monkeypatch.setenv("EDGEROUTE_SERVER__TRUSTED_PROXIES", "nginx")
    with pytest.raises(ConfigError, match=r"server.trusted_proxies: Value error, .nginx. is not an IP address or network"):
        load_settings()


def test_a_local_member_gets_the_cores_the_edge_leaves() -> None:
    from edge import EdgeSettings
    from router.node import local_member_threads

    assert local_member_threads(EdgeSettings(n_threads=1), cores=2) == 1
    assert local_member_threads(EdgeSettings(n_threads=3), cores=8) == 5
    assert local_member_threads(EdgeSettings(n_threads=4), cores=2) == 1  # never none
    assert local_member_threads(EdgeSettings(n_threads="auto"), cores=2) == max(1, 2 - EdgeSettings().threads())


def test_the_local_member_goes_first_only_where_it_computes_bfloat16_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    import cloud.member.launcher as launcher
    from cloud import MemberSettings, PoolSettings
    from router.node import member_first

    monkeypatch.setattr(launcher, "pick_device", lambda choice: "cpu")  # as on a host with no GPU
    amx = "model name\t: Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_int8\n"
    avx2 = "model name\t: EPYC\nflags\t\t: fpu avx2 fma\n"
    assert member_first(PoolSettings(), amx) is True
    assert member_first(PoolSettings(), avx2) is False  # float32 there: the two engines split the cores
    assert member_first(PoolSettings(local_dtype="float32"), amx) is False
    assert member_first(PoolSettings(local_dtype="bfloat16"), avx2) is False  # emulated
    assert member_first(PoolSettings(local_threads=1), amx) is False  # the operator sized it
    assert member_first(PoolSettings(local_member=False), amx) is False
    remote = MemberSettings(name="gpu", base_url="http://10.0.0.2:8000/v1", model="m")
    assert member_first(PoolSettings(members=[remote]), amx) is False
