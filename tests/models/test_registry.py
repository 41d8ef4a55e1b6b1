from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from models import (
    EDGE_DEFAULT,
    ChecksumMismatchError,
    ModelError,
    UnknownModelError,
    default_models_dir,
    registry,
    resolve,
    verify,
)


def test_registry_lists_every_bundled_model() -> None:
    specs = registry(default_models_dir())
    assert sorted(specs) == ["all-minilm-l6-v2", "gemma3-270m", EDGE_DEFAULT]
    edge = specs[EDGE_DEFAULT]
    assert (edge.kind, edge.quantization, edge.context_length, edge.chat_template) == ("chat", "Q4_1", 8192, True)
    gemma = specs["gemma3-270m"]
    assert (gemma.kind, gemma.quantization, gemma.chat_template) == ("completion", "Q4_K_M", False)
    assert gemma.context_length == 32768
    assert specs["all-minilm-l6-v2"].kind == "embedding"


def test_resolve_unknown_alias_lists_valid_ones() -> None:
    with pytest.raises(UnknownModelError) as info:
        resolve("gpt-17", default_models_dir())
    assert "gpt-17" in info.value.message
    assert "smollm2-135m-instruct, gemma3-270m, all-minilm-l6-v2" in info.value.message
    assert info.value.param == "model"


def test_unprepared_assembled_model_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="models prepare"):
        resolve("gemma3-270m", tmp_path / "empty")


def test_verify_detects_a_corrupt_file(tmp_path: Path) -> None:
    spec = resolve(EDGE_DEFAULT, default_models_dir())
    verify(spec)  # the bundled file is intact
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(spec.path.read_bytes()[:4096] + b"tampered")
    with pytest.raises(ChecksumMismatchError, match="expected " + spec.sha256):
        verify(replace(spec, path=bad))
