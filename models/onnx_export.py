"""The embedding model for ONNX Runtime: export all-MiniLM-L6-v2 with optimum, quantize it to INT8.

The export is one-time work (``edgeroute models prepare`` runs it; the embedder runs it on first
use when it is missing). Heavy imports (optimum, torch, onnxruntime) happen inside the functions.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .errors import ModelError
from .registry import EMBEDDING_DEFAULT, resolve

ONNX_FP32 = "model.onnx"
ONNX_INT8 = "model_int8.onnx"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "config.json")


def onnx_model_dir(models_dir: Path) -> Path:
    """Where the exported embedding model lives (``model.onnx``, ``model_int8.onnx``, tokenizer)."""
    return Path(models_dir) / f"{EMBEDDING_DEFAULT}-onnx"


def onnx_model_path(models_dir: Path, int8: bool = True) -> Path:
    return onnx_model_dir(models_dir) / (ONNX_INT8 if int8 else ONNX_FP32)


def export_embedder(models_dir: Path, progress: bool = False) -> Path:
    """Export the embedding model to ONNX and quantize it to INT8; return the INT8 file.

    Idempotent: returns at once when both files exist. Writes into a temporary directory first
    and renames it into place, so concurrent runs and interruptions never leave half a model.
    """
    target = onnx_model_dir(models_dir)
    if (target / ONNX_INT8).is_file() and (target / ONNX_FP32).is_file():
        return target / ONNX_INT8
    source = resolve(EMBEDDING_DEFAULT, models_dir).path.parent
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".onnx-export-", dir=target.parent))
    work.chmod(0o755)  # mkdtemp makes it private; the renamed directory is a shared artifact
    try:
        if progress:
            print(f"export {EMBEDDING_DEFAULT} to ONNX ...", flush=True)
        _export_fp32(source, work)
        if progress:
            print(f"quantize {EMBEDDING_DEFAULT} to INT8 ...", flush=True)
        _quantize_int8(work / ONNX_FP32, work / ONNX_INT8)
        for name in _TOKENIZER_FILES:
            if (source / name).is_file() and not (work / name).is_file():
                shutil.copy2(source / name, work / name)
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    except ModelError:
        raise
    except Exception as exc:  # optimum/torch/onnx raise many types; all mean "export failed"
        raise ModelError(f"exporting {EMBEDDING_DEFAULT} to ONNX failed: {exc}") from exc
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return target / ONNX_INT8


def _export_fp32(source: Path, out: Path) -> None:
    from optimum.exporters.onnx import main_export

    main_export(
        model_name_or_path=str(source),
        output=out,
        task="feature-extraction",
        opset=17,
        device="cpu",
        no_post_process=True,
        do_validation=False,
    )
    if not (out / ONNX_FP32).is_file():
        raise ModelError(f"optimum wrote no {ONNX_FP32} into {out}")


def _quantize_int8(fp32: Path, int8: Path) -> None:
    """Dynamic INT8 quantization of the weights (activations quantized at run time)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        model_input=str(fp32),
        model_output=str(int8),
        weight_type=QuantType.QInt8,
        per_channel=True,
        # Gather of the word-embedding table stays fp32: quantizing it costs accuracy for no speed.
        op_types_to_quantize=["MatMul", "Gemm"],
    )
