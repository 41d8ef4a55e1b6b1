"""The full-precision twin of a bundled GGUF: dequantized once to fp32, saved as a transformers dir.

Converting the GGUF takes tens of seconds (the tokenizer conversion alone is slow), so it is done
once, under a file lock, and every later start (and every tensor-parallel rank) loads the saved
directory in well under a second.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

from models import EDGE_DEFAULT, EdgerouteError, resolve

from ..errors import WeightsError

log = logging.getLogger(__name__)

_MARKER = ".edgeroute-twin"


def twin_dir(alias: str, models_dir: Path) -> Path:
    """Where the fp32 twin of ``alias`` lives."""
    return Path(models_dir) / f"{alias}-fp32"


def _complete(target: Path, sha256: str) -> bool:
    marker = target / _MARKER
    return marker.is_file() and marker.read_text().strip() == sha256


def ensure_weights(model: str, models_dir: Path) -> Path:
    """The transformers directory to load for ``model``: a given directory, or the alias's fp32 twin."""
    if Path(model).is_dir():
        return Path(model)
    try:
        spec = resolve(model, models_dir)
    except EdgerouteError as exc:
        raise WeightsError(exc.message, param="model", code=exc.code) from exc
    if spec.kind == "embedding":
        raise WeightsError(
            f"{model!r} is an embedding model; a member serves a generative model", param="model"
        )
    target = twin_dir(spec.alias, models_dir)
    if _complete(target, spec.sha256):
        return target
    lock_path = target.parent / f".{target.name}.lock"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = lock_path.open("w")
    except OSError as exc:  # read-only or full models dir: say where, not a bare traceback
        raise WeightsError(
            f"cannot write the fp32 twin of {model!r} under {target.parent}: {exc}",
            param="model",
            code="models_dir_unwritable",
        ) from exc
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting the same model
        except OSError as exc:
            raise WeightsError(f"cannot lock {lock_path}: {exc}", code="models_dir_unwritable") from exc
        if not _complete(target, spec.sha256):
            _convert(spec.path, target, spec.sha256)
    return target


def _convert(gguf: Path, target: Path, sha256: str) -> None:
    log.warning("dequantizing %s to fp32 (one-time work) into %s", gguf.name, target)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _MARKER).write_text(sha256)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WeightsError(f"could not dequantize {gguf}: {exc}") from exc
    shutil.rmtree(target, ignore_errors=True)
    try:
        tmp.rename(target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WeightsError(f"could not move the fp32 twin into {target}: {exc}") from exc


def prepare_twin(models_dir: Path, progress: bool) -> None:
    """`edgeroute models prepare` step: build the local member's fp32 twin ahead of time."""
    ensure_weights(EDGE_DEFAULT, models_dir)
