"""Shared helpers of the cache tests: request keys and a module-scoped real embedder."""

from __future__ import annotations

from edge import CacheKey
from models import SamplingParams

GREEDY = SamplingParams(temperature=0.0)


def chat(text: str, tenant: str = "t1", params: SamplingParams = GREEDY, model: str = "auto",
         system: str | None = None, extra: dict | None = None) -> CacheKey:
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    return CacheKey(tenant, model, tuple(msgs), None, params, extra or {})


import pytest  # noqa: E402

from edge import Embedder  # noqa: E402


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The real INT8 ONNX embedder, loaded once per module (exported on first use)."""
    emb = Embedder.load()
    yield emb
    emb.close()
