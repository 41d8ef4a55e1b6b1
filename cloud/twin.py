"""The full-precision twin of a bundled GGUF: dequantized once to fp32 and saved as a model
directory vLLM loads (weights, config, tokenizer, chat template).

Converting the GGUF takes tens of seconds (the tokenizer conversion alone is slow), so it is done
once, under a file lock, by `edgeroute models prepare` or the first member start.

The tokenizer ``transformers`` converts from the GGUF is not the model's: it is declared a
``LlamaTokenizer`` (a newer ``transformers``, vLLM's, then decodes byte-level tokens as ``ĊĊTheĠ``),
its end-of-sequence token is ``<|im_start|>`` and it adds a BOS the GGUF says not to. The twin's
tokenizer files are rewritten from the GGUF's own metadata (see :func:`fix_tokenizer`), so vLLM
and llama.cpp read a prompt as the same tokens and stop on the same token.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from models import EDGE_DEFAULT, EdgerouteError, resolve

from .errors import WeightsError

log = logging.getLogger(__name__)

_MARKER = ".edgeroute-twin"
# Bumped when the twin's files change, so a twin made by an older version is made again.
_FORMAT = "2"


def _stamp(sha256: str) -> str:
    return f"{sha256} {_FORMAT}"


def _complete(target: Path, sha256: str) -> bool:
    marker = target / _MARKER
    return marker.is_file() and marker.read_text().strip() == _stamp(sha256)


def ensure_twin(model: str, models_dir: Path) -> Path:
    """The model directory to serve for ``model``: a given directory, or the alias's fp32 twin
    (made now if it is missing or out of date)."""
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
    target = Path(models_dir) / f"{spec.alias}-twin"
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
        fix_tokenizer(tmp, _gguf_tokenizer_meta(gguf))
        (tmp / _MARKER).write_text(_stamp(sha256))
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WeightsError(f"could not dequantize {gguf}: {exc}") from exc
    shutil.rmtree(target, ignore_errors=True)
    try:
        tmp.rename(target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WeightsError(f"could not move the fp32 twin into {target}: {exc}") from exc


# What a GGUF says about its tokenizer (``tokenizer.ggml.<key>``) that the twin's must say too.
_META_KEYS = ("pre", "add_bos_token", "bos_token_id", "eos_token_id", "padding_token_id", "unknown_token_id")


def _gguf_tokenizer_meta(gguf: Path) -> dict[str, Any]:
    from gguf import GGUFReader

    fields = GGUFReader(gguf).fields
    return {key: f.contents() for key in _META_KEYS if (f := fields.get(f"tokenizer.ggml.{key}")) is not None}


# llama.cpp's pre-tokenizers of a GPT-2 style (byte-level BPE) vocabulary, as `tokenizers` steps:
# "smollm" splits digits one by one before GPT-2's regex.
_DIGITS: dict[str, Any] = {"type": "Digits", "individual_digits": True}
_BYTE_LEVEL: dict[str, Any] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def fix_tokenizer(directory: Path, meta: dict[str, Any]) -> None:
    """Rewrite a converted byte-level BPE tokenizer in ``directory`` as the GGUF describes it:
    byte-level pre-tokenizer and decoder, the GGUF's special tokens, BOS added only if it says so,
    loaded as a plain tokenizers-backed tokenizer (no class that rebuilds it its own way)."""
    path = directory / "tokenizer.json"
    spec = json.loads(path.read_text())
    if spec.get("model", {}).get("type") != "BPE":
        return  # a SentencePiece-style vocabulary: its converted tokenizer is already right
    steps = [_DIGITS, _BYTE_LEVEL] if meta.get("pre") == "smollm" else [_BYTE_LEVEL]
    spec["normalizer"] = None
    spec["model"]["byte_fallback"] = False  # bytes are tokens of their own in a byte-level vocabulary
    spec["pre_tokenizer"] = steps[0] if len(steps) == 1 else {"type": "Sequence", "pretokenizers": steps}
    spec["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    add_bos = bool(meta.get("add_bos_token"))
    if not add_bos:  # the converted one prepends a BOS whatever the GGUF says
        spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    path.write_text(json.dumps(spec, ensure_ascii=False))

    vocab = {i: t for t, i in spec["model"]["vocab"].items()}
    vocab.update({t["id"]: t["content"] for t in spec.get("added_tokens", [])})
    special = {
        f"{role}_token": vocab[meta[f"{key}_token_id"]]
        for role, key in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding"))
        if meta.get(f"{key}_token_id") in vocab
    }

    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    for key in ("legacy", "add_prefix_space", "model_type", "bos_token_id", "eos_token_id", "unk_token_id", "pad_token_id"):
        config.pop(key, None)
    config.update(special)
    config.update(
        tokenizer_class="PreTrainedTokenizerFast",
        add_bos_token=add_bos,
        add_eos_token=False,
        clean_up_tokenization_spaces=False,
    )
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2, ensure_ascii=False))


def prepare_twin(models_dir: Path, progress: bool) -> None:
    """`edgeroute models prepare` step: build the local member's fp32 twin ahead of time."""
    ensure_twin(EDGE_DEFAULT, models_dir)
