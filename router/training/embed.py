"""Prompt embeddings for training and evaluation (sentence-transformers on the bundled model).

Only the offline commands (train, calibrate, eval) import this; at serve time the router reuses the
embedding the cache computed, so these functions are swappable for any ``EmbedFn``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from models import EMBEDDING_DEFAULT, ModelError, default_models_dir, resolve

EmbedFn = Callable[[Sequence[str]], np.ndarray]


def default_model_dir() -> Path:
    """The bundled all-MiniLM-L6-v2 directory."""
    return resolve(EMBEDDING_DEFAULT, default_models_dir()).path.parent


@functools.lru_cache(maxsize=2)
def _model(model_dir: str) -> Any:
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(model_dir, device="cpu")
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the embedding model from {model_dir}: {exc}") from exc


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), 384)."""
    model = _model(str(default_model_dir()))
    vectors = model.encode(
        list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(vectors, dtype=np.float32)


def count_tokens(texts: Sequence[str]) -> list[int]:
    """Token counts by the embedding model's tokenizer (a stand-in for the edge tokenizer offline)."""
    tokenizer = _model(str(default_model_dir())).tokenizer
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
