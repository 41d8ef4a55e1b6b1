"""The verifier's model at run time: a MiniLM cross-encoder in ONNX (INT8), read by ONNX Runtime.

A cross-encoder reads the query and the stored question as one input (``[CLS] q [SEP] s [SEP]``),
so attention compares their words directly: "GATE" vs "GATE ME", "to Paris" vs "from Paris". One
call scores every candidate of a lookup in one batched model run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VerifierError

MAX_TOKENS = 64  # query + stored question; the questions a cache compares are short


class CrossEncoder:
    """Raw scores (logits) of (query, stored) pairs; larger means "the stored answer serves the query"."""

    def __init__(self, model: Path, tokenizer: Path, *, threads: int = 1, max_tokens: int = MAX_TOKENS) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(tokenizer))
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # As for the embedder (edge/embedder.py): no per-shape plans kept, the arena shrunk
            # after each run, so batches of every size leave no memory behind.
            opts.enable_mem_pattern = False
            self._session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime and tokenizers raise their own base types
            raise VerifierError(f"cannot load the verifier model {model}: {exc}") from exc
        tok.enable_truncation(max_tokens, strategy="longest_first")
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest pair of the batch
        self._tokenizer = tok
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()  # the tokenizer's padding state is shared; runs are short
        self.runs = 0

    def logits(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        """Scores of ``query`` against each candidate, in one model run."""
        return self.pair_logits([(query, c) for c in candidates])

    def pair_logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Scores of arbitrary (query, stored) pairs, in one model run."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            enc = self._tokenizer.encode_batch([(q or " ", s or " ") for q, s in pairs])
            self.runs += 1
        feed: dict[str, Any] = {
            "input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
        }
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.asarray([e.type_ids for e in enc], dtype=np.int64)
        try:
            out = self._session.run(None, feed, self._run_options)[0]
        except Exception as exc:  # onnxruntime's errors have no common public base
            raise VerifierError(f"the verifier model failed: {exc}") from exc
        return np.asarray(out, dtype=np.float32).reshape(len(pairs))

    def many_logits(self, pairs: Sequence[tuple[str, str]], batch: int = 64) -> np.ndarray:
        """Scores of many pairs (training, calibration), in batches of ``batch``."""
        parts = [self.pair_logits(pairs[i : i + batch]) for i in range(0, len(pairs), batch)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
