"""Keys held as digests, compared in constant time; data files 0600."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path

import pytest

from models.files import private_dir, private_file
from models.keys import KeyTable, as_digest, key_digest
from router import ServerSettings, is_loopback, load_settings


def test_a_digest_is_sha256_and_a_digest_in_the_settings_is_kept() -> None:
    digest = key_digest("sk-a")
    assert digest == "sha256:" + hashlib.sha256(b"sk-a").hexdigest()
    assert as_digest(digest) == digest
    assert as_digest("sk-a") == digest and as_digest("sha256:xyz") == key_digest("sha256:xyz")  # not a digest: a key


def test_lookup_finds_the_principal_and_nothing_else() -> None:
    table = KeyTable.of({"sk-a": "team-a", key_digest("sk-b"): "team-b"}, ["sk-op"])
    a, b, op = table.lookup("sk-a"), table.lookup("sk-b"), table.lookup("sk-op")
    assert a is not None and (a.tenant, a.operator) == ("team-a", False)
    assert b is not None and b.tenant == "team-b"  # the file held only the digest
    assert op is not None and (op.tenant, op.operator) == (None, True)
    for wrong in ("", "sk-a ", "SK-A", "sk-", key_digest("sk-a"), "sk-opx"):
        assert table.lookup(wrong) is None, wrong
    assert table.enabled and not KeyTable().enabled and KeyTable().lookup("") is None
    assert "sk-" not in repr(table) + repr(op)


def test_every_key_is_compared_whichever_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """No early exit: the same number of constant-time comparisons for the first, the last and no key."""
    table = KeyTable.of({f"sk-{i}": f"t{i}" for i in range(5)}, ["sk-op"])
    calls: list[int] = []
    real = hmac.compare_digest

    def counting(x: bytes, y: bytes) -> bool:
        calls.append(len(x))
        return real(x, y)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for key in ("sk-0", "sk-4", "sk-op", "nope"):
        calls.clear()
        table.lookup(key)
        assert calls == [32] * 6, key  # digests, never the keys themselves


def test_settings_hold_digests_only() -> None:
    settings = load_settings(server={"api_keys": {"sk-tenant-secret": "team-a"}, "operator_keys": ["sk-op-secret"]})
    dumped = repr(settings) + settings.model_dump_json() + str(settings.server)
    assert "sk-tenant-secret" not in dumped and "sk-op-secret" not in dumped
    assert settings.server.api_keys == {key_digest("sk-tenant-secret"): "team-a"}
    assert settings.server.key_table().lookup("sk-op-secret") is not None
    # Digests load back as themselves: a dumped config is still the same keys.
    again = ServerSettings.model_validate(settings.server.model_dump())
    assert again.key_table().lookup("sk-tenant-secret") is not None
    assert ServerSettings(operator_keys="k1, k2").key_table().lookup("k2") is not None  # type: ignore[arg-type]


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "192.0.2.10", "10.0.0.1", "no-such-host.invalid"):
        assert not is_loopback(host), host


def test_data_files_are_created_0600_in_a_0700_dir(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    db = private_file(data / "cache.db", sqlite=True)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and db.stat().st_size == 0
    # An existing file readable by others (and its WAL) is tightened; an existing dir is left alone.
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    os.chmod(old, 0o755)
    for name in ("telemetry.db", "telemetry.db-wal"):
        (old / name).write_bytes(b"x")
        os.chmod(old / name, 0o644)
    private_file(old / "telemetry.db", sqlite=True)
    assert stat.S_IMODE((old / "telemetry.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((old / "telemetry.db-wal").stat().st_mode) == 0o600
    assert (old / "telemetry.db").read_bytes() == b"x"
    assert stat.S_IMODE(private_dir(old).stat().st_mode) == 0o755
