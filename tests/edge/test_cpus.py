"""``edge.n_threads = "auto"``: physical cores (hyperthreads once, packages apart, the affinity
honoured) less one, at least 1; and the setting's validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge import EdgeSettings
from edge.cpus import auto_threads, physical_cores
from router import load_settings
from router.errors import ConfigError


def _sysfs(root: Path, topology: dict[int, tuple[int, int]]) -> Path:
    """A /sys/devices/system/cpu tree: logical cpu -> (physical_package_id, core_id)."""
    for cpu, (package, core) in topology.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text(f"{package}\n")
        (d / "core_id").write_text(f"{core}\n")
    return root


# 8 logical CPUs: 4 cores with two hyperthreads each (siblings n and n + 4, as Linux numbers them).
SMT = {cpu: (0, cpu % 4) for cpu in range(8)}
# Two packages whose core ids repeat (0..2 on each).
TWO_PACKAGES = {cpu: (cpu // 3, cpu % 3) for cpu in range(6)}


def test_hyperthreads_of_one_core_count_once(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, SMT)
    assert physical_cores(range(8), sysfs) == 4
    assert auto_threads(range(8), sysfs) == 3


def test_the_same_core_id_on_two_packages_is_two_cores(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, TWO_PACKAGES)
    assert physical_cores(range(6), sysfs) == 6
    assert auto_threads(range(6), sysfs) == 5


def test_only_the_cpus_the_process_may_use_count(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, SMT)
    assert physical_cores({0, 4}, sysfs) == 1  # two siblings: one core
    assert auto_threads({0, 4}, sysfs) == 1  # never below one thread
    assert physical_cores({0, 1, 4, 5}, sysfs) == 2
    assert auto_threads({0, 1, 4, 5}, sysfs) == 1
    assert auto_threads({0, 1, 2}, sysfs) == 2


def test_without_a_readable_topology_every_allowed_cpu_counts(tmp_path: Path) -> None:
    assert physical_cores({0, 1, 2}, tmp_path / "absent") == 3
    assert auto_threads({0, 1, 2}, tmp_path / "absent") == 2
    assert auto_threads(set(), tmp_path / "absent") == 1


def test_auto_is_the_default_and_resolves_from_this_machine() -> None:
    settings = EdgeSettings()
    assert settings.n_threads == "auto"
    assert settings.threads() == auto_threads()


def test_a_count_is_taken_as_given() -> None:
    assert EdgeSettings(n_threads=3).threads() == 3
    assert EdgeSettings(n_threads="2").threads() == 2  # as an environment variable gives it


@pytest.mark.parametrize("bad", [0, -1, "all", "", 1.5, True, None])
def test_anything_else_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match='n_threads must be "auto" or a whole number of threads >= 1'):
        EdgeSettings(n_threads=bad)


def test_a_bad_value_from_the_environment_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EDGEROUTE_EDGE__N_THREADS", "many")
    with pytest.raises(ConfigError, match=r"edge\.n_threads"):
        load_settings(data_dir=tmp_path)
    monkeypatch.setenv("EDGEROUTE_EDGE__N_THREADS", "4")
    assert load_settings(data_dir=tmp_path).edge.threads() == 4


SAPPHIRE_RAPIDS = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"


def test_amx_is_read_from_the_first_cpus_flags() -> None:
    from edge.cpus import has_amx

    assert has_amx(SAPPHIRE_RAPIDS) is True
    assert has_amx(EPYC) is False
    assert has_amx("model name\t: amx_int8 in a name, not a flag\n") is False
    assert has_amx("") is False


@pytest.mark.parametrize(("amx", "extra_bufts"), [(True, False), (False, True)])
def test_a_reference_llama_lays_its_weights_out_as_the_edge_does(
    monkeypatch: pytest.MonkeyPatch, amx: bool, extra_bufts: bool
) -> None:
    import llama_cpp.llama_cpp as lib

    from bench import llamaref

    monkeypatch.setattr(llamaref, "has_amx", lambda: amx)
    default = lib.llama_model_default_params
    with llamaref.plain_weights():
        assert lib.llama_model_default_params().use_extra_bufts is extra_bufts
    assert lib.llama_model_default_params is default
    assert lib.llama_model_default_params().use_extra_bufts is True
