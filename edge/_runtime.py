"""The llama.cpp model and context behind the engine, through llama-cpp-python's low-level API
(its ctypes bindings of llama.h; the package's ``_internals`` wrappers are not its API).

``llama_cpp.Llama`` keeps one sequence per context; continuous batching needs a context with
``n_seq_max = slots``, so the engine opens the model and the context itself. Each slot gets a KV
stream of its own (``kv_unified = False``, as ``llama-server -np N`` does): a sequence's KV cells
then sit at the same places whatever runs beside it, which keeps greedy output batch-independent.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._grammar import Candidates, Constrained

from .config import EdgeSettings
from .cpus import has_amx
from .errors import EngineLoadError, GenerationError

# ggml's type ids (ggml.h), so this module does not import llama_cpp at import time.
_KV_TYPES = {"f16": 1, "q8_0": 8}


@functools.cache
def _init_backend() -> None:
    import llama_cpp

    # llama.cpp's log reaches this logger (llama-cpp-python sets the callback at import): its
    # errors only, as ``verbose=False`` does.
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    llama_cpp.llama_backend_init()


class Vocab:
    """Tokenizing and detokenizing: they only read the vocabulary, so any thread may call them.

    A token's text and whether it ends generation never change, so the scheduler's per-token
    questions are answered from a cache after the first ctypes call (``functools.cache`` is safe
    for callers on other threads).
    """

    def __init__(self, model: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.ptr: Any = llama_cpp.llama_model_get_vocab(model)  # ``llama_vocab *`` (grammar samplers read it)
        self.eos: int = llama_cpp.llama_vocab_eos(self.ptr)
        self.bos: int = llama_cpp.llama_vocab_bos(self.ptr)
        self.n_vocab: int = llama_cpp.llama_vocab_n_tokens(self.ptr)
        self.piece = functools.cache(lambda token: self.detokenize([token]))  # one token's bytes
        self.is_eog = functools.cache(  # whether a token ends generation
            lambda token: token == self.eos or bool(llama_cpp.llama_vocab_is_eog(self.ptr, token))
        )

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
        size = len(text) + 2  # room for every byte a token and the BOS/EOS; asked again if short
        for _ in range(2):
            tokens = (self._lib.llama_token * size)()
            n = self._lib.llama_tokenize(self.ptr, text, len(text), tokens, size, add_bos, special)
            if n >= 0:
                return tokens[:n]
            size = -n
        raise GenerationError(f"llama.cpp could not tokenize {len(text)} bytes")

    def _piece(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self.ptr, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self.ptr, token, buf, -n, 0, special)
        return buf.raw[:n]

    def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
        text = b"".join(self._piece(t, special) for t in tokens)
        # As llama-cpp-python's detokenizer: a BOS-led text drops the space its first word brought.
        return text[1:] if tokens and tokens[0] == self.bos and text[:1] == b" " else text

    def token_text(self, token: int) -> str:
        return str(self._lib.llama_vocab_get_text(self.ptr, token).decode("utf-8"))

    def longest_piece(self) -> int:
        """Bytes of text in the longest token (special ones included): no prompt has fewer
        tokens than its bytes divided by this."""
        return max(1, max(len(self.detokenize([t], special=True)) for t in range(self.n_vocab)))


class Batch:
    """One reusable ``llama_batch``: a token, its position, its sequence and whether to output logits."""

    def __init__(self, capacity: int) -> None:
        import llama_cpp

        self.capacity = capacity
        self._free = llama_cpp.llama_batch_free
        self.raw = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    def add(self, token: int, pos: int, seq: int, logits: bool) -> int:
        """Append one token; returns its index in the batch (where its logits will be)."""
        i = self.n
        raw = self.raw
        raw.token[i] = token
        raw.pos[i] = pos
        raw.n_seq_id[i] = 1
        raw.seq_id[i][0] = seq
        raw.logits[i] = 1 if logits else 0
        self.n = i + 1
        return i

    def close(self) -> None:
        if self.raw is not None:
            self.raw.n_tokens = 0
            self._free(self.raw)
            self.raw = None


class Runtime:
    """The model, one context with ``slots`` sequences, and the calls the scheduler makes on it.

    Only the scheduler thread calls :meth:`decode`, :meth:`sample` and the ``seq_*`` methods.
    """

    def __init__(self, path: Path, settings: EdgeSettings) -> None:
        try:
            import llama_cpp

            _init_backend()
            model_params = llama_cpp.llama_model_default_params()
            model_params.n_gpu_layers = 0
            # llama.cpp's AMX path (weights repacked into an extra buffer type) segfaults in
            # ggml_backend_amx_mul_mat: on a CPU with AMX the weights stay in their plain layout.
            model_params.use_extra_bufts = not has_amx()
            self._model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), model_params)
            if not self._model:
                raise ValueError("the model did not load")
            slots = settings.slots
            self.n_ctx_slot = min(settings.n_ctx, llama_cpp.llama_model_n_ctx_train(self._model))
            cp = llama_cpp.llama_context_default_params()
            cp.n_ctx = self.n_ctx_slot * slots
            cp.n_seq_max = slots
            cp.kv_unified = False
            cp.n_batch = settings.n_batch
            cp.n_ubatch = settings.n_batch
            threads = settings.threads()
            cp.n_threads = threads
            cp.n_threads_batch = threads
            cp.flash_attn_type = (
                llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
                if settings.flash_attn
                else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
            )
            cp.type_k = _KV_TYPES[settings.kv_type_k]
            cp.type_v = _KV_TYPES[settings.kv_type_v]
            cp.no_perf = True
            self.ctx = llama_cpp.llama_init_from_model(self._model, cp)
            if not self.ctx:
                llama_cpp.llama_model_free(self._model)
                raise ValueError("its context could not be made")
        except (ValueError, RuntimeError, OSError) as exc:
            raise EngineLoadError(f"llama.cpp could not load {path}: {exc}") from exc
        self._free = (llama_cpp.llama_free, llama_cpp.llama_model_free)
        self._mem = llama_cpp.llama_get_memory(self.ctx)
        self._decode = llama_cpp.llama_decode
        self._sample = llama_cpp.llama_sampler_sample
        self._logits = llama_cpp.llama_get_logits
        self._logits_ith = llama_cpp.llama_get_logits_ith
        self._seq_rm = llama_cpp.llama_memory_seq_rm
        self.vocab = Vocab(self._model)
        # The model's own chat template (Jinja), as its GGUF carries it; "" for a base model.
        self.chat_template = (llama_cpp.llama_model_chat_template(self._model, None) or b"").decode("utf-8")
        self.batch = Batch(settings.n_batch)
        self._candidates: Candidates | None = None  # built by the first grammar request

    def decode(self) -> None:
        """Run the current batch through the model (one forward pass for every sequence in it)."""
        batch = self.batch
        batch.raw.n_tokens = batch.n
        rc = self._decode(self.ctx, batch.raw)
        if rc != 0:
            # 1: no KV space (cannot happen while every sequence stays within its slot's window);
            # 2: aborted; < 0: a failure inside llama.cpp.
            raise GenerationError(f"llama_decode failed with status {rc}")

    def sample(self, sampler: Any, index: int) -> int:
        if isinstance(sampler, Constrained):
            if self._candidates is None:
                self._candidates = Candidates(self.vocab.n_vocab)
            return sampler.sample(self.logits_row(index), self._candidates)
        return int(self._sample(sampler, self.ctx, index))

    def logits_row(self, index: int) -> np.ndarray:
        """The logits of one batch index (a view into llama.cpp's buffer, valid until the next decode)."""
        address = ctypes.cast(self._logits_ith(self.ctx, index), ctypes.c_void_p).value
        return np.ctypeslib.as_array((ctypes.c_float * self.vocab.n_vocab).from_address(address))  # type: ignore[arg-type]

    def argmax(self, indices: list[int]) -> list[int]:
        """The greedy token of each batch index's logits row (~3 us a row, against ~45 us a sample).

        The same token as llama.cpp's greedy sampler (the first index of the largest logit,
        which is what ``np.argmax`` returns too) without building its 49k-entry candidate array
        per sequence. The row of each index is found from llama.cpp's own pointer for it, so
        this does not depend on how llama.cpp orders its output rows.
        """
        n_vocab = self.vocab.n_vocab
        row_bytes = 4 * n_vocab
        base = ctypes.cast(self._logits(self.ctx), ctypes.c_void_p).value
        rows = [
            (ctypes.cast(self._logits_ith(self.ctx, i), ctypes.c_void_p).value - base) // row_bytes  # type: ignore[operator]
            for i in indices
        ]
        n_rows = max(rows) + 1
        logits = np.ctypeslib.as_array(
            (ctypes.c_float * (n_rows * n_vocab)).from_address(base)  # type: ignore[arg-type]
        ).reshape(n_rows, n_vocab)
        # Row by row: numpy's argmax over one contiguous row is faster than over axis 1.
        return [int(logits[r].argmax()) for r in rows]

    def seq_rm(self, seq: int, p0: int) -> bool:
        """Forget ``seq``'s KV from position ``p0`` on; False when a partial removal was refused."""
        if p0 > 0 and self._seq_rm(self._mem, seq, p0, -1):
            return True
        # A whole removal never fails (a partial one can, on some memory types).
        self._seq_rm(self._mem, seq, 0, -1)
        return p0 == 0

    def close(self) -> None:
        self.batch.close()
        if self.ctx is not None:
            free_ctx, free_model = self._free
            free_ctx(self.ctx)
            free_model(self._model)
            self.ctx = self._model = None


def penalties_sampler(
    window: int, seen: list[int], repeat: float = 1.0, frequency: float = 0.0, presence: float = 0.0
) -> Any:
    """llama.cpp's penalties over the last ``window`` tokens the chain samples, primed with ``seen``:
    OpenAI's frequency and presence penalties (``seen``: a continuation's answer so far, counted as
    generated), or llama.cpp's repeat penalty (``seen``: the prompt, as its server primes it)."""
    import llama_cpp

    # The binding declares (n_vocab, last_n, ...) while newer llama.cpp takes (last_n, ...): with
    # both ints equal, either reads the window (x86-64 and arm64 pass ints and floats apart).
    sampler = llama_cpp.llama_sampler_init_penalties(window, window, repeat, frequency, presence)
    for token in seen[-window:]:
        llama_cpp.llama_sampler_accept(sampler, token)
    return sampler


def logit_bias_sampler(n_vocab: int, bias: tuple[tuple[int, float], ...]) -> Any:
    """OpenAI's ``logit_bias``: each listed token's logit raised or lowered by its bias."""
    import llama_cpp

    pairs = (llama_cpp.llama_logit_bias * len(bias))(*(llama_cpp.llama_logit_bias(t, b) for t, b in bias))
    return llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(bias), pairs)


def sampler_chain(
    temperature: float, top_p: float, seed: int, top_k: int, min_p: float, first: Sequence[Any] = ()
) -> Any:
    """A fresh sampler for one request: greedy at temperature 0, else the chain ``Llama`` builds.

    ``first`` (samplers of logit bias and penalties, owned by the chain from here on) go first, so
    every later step sees the biased, penalized logits. Plain greedy requests are sampled by
    :meth:`Runtime.argmax` instead; a grammar is kept beside the chain (:class:`Constrained`).
    """
    import llama_cpp

    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    add = llama_cpp.llama_sampler_chain_add
    for sampler in first:
        add(chain, sampler)
    if temperature <= 0.0:
        add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    add(chain, llama_cpp.llama_sampler_init_top_k(top_k))
    add(chain, llama_cpp.llama_sampler_init_top_p(top_p, 1))
    add(chain, llama_cpp.llama_sampler_init_min_p(min_p, 1))
    add(chain, llama_cpp.llama_sampler_init_temp(temperature))
    add(chain, llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF))
    return chain
