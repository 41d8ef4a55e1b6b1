"""Sentence embeddings on the box: all-MiniLM-L6-v2 exported to ONNX (INT8), run by ONNX Runtime.

Concurrent ``embed`` calls are queued together: the first call of a quiet period waits a small
window for companions (by default one turn of the event loop), and calls arriving while a run
goes on are picked from for the next one: short, fair across keys, never starving a long text.

The INT8 model runs one text per model run: its dynamic quantization scales activations per run,
so a text run with others got a vector that moved with them and a borderline cache decision could
flip with the load. On CPU that is not slower (a run's time is its padded tokens). The fp32 model
still shares runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from models import ModelError, default_models_dir, export_embedder, onnx_model_path

from ._fair import FairQueue
from .config import CacheSettings
from .errors import EmbedderError

log = logging.getLogger(__name__)

DIM = 384
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)


class Embedder:
    """384-dimensional, L2-normalised float32 sentence embeddings."""

    dim = DIM
    max_tokens = MAX_TOKENS

    def __init__(self, model_path: Path, settings: CacheSettings) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.window_s = settings.embed_window_ms / 1000.0
        self.max_batch = settings.embed_max_batch
        # Texts in one model run (None: as many as the token budget allows); 1 keeps a text's
        # vector independent of the texts that run with it (see the module docstring).
        self.run_rows = 1 if settings.embed_int8 else None
        try:
            tok = Tokenizer.from_file(str(model_path.parent / "tokenizer.json"))
            providers = ["CPUExecutionProvider"]
            if settings.embed_device == "cuda":
                if "CUDAExecutionProvider" not in ort.get_available_providers():
                    raise EmbedderError(
                        "embed_device is 'cuda' but onnxruntime has no CUDA provider; "
                        "install the 'gpu' extra (onnxruntime-gpu)"
                    )
                providers.insert(0, "CUDAExecutionProvider")
            self._session, self._run_options, _ = onnx_session(model_path, settings.embed_threads, providers)
        except EmbedderError:
            raise
        except Exception as exc:  # onnxruntime and tokenizers raise their own base types
            raise EmbedderError(f"cannot load the embedding model {model_path}: {exc}") from exc
        tok.enable_truncation(MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest text of a batch
        self._tokenizer = tok
        # One model run at a time: ONNX Runtime already uses ``threads`` cores inside a run.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self.runs = 0  # model runs so far
        self.texts = 0  # texts embedded so far

    @classmethod
    def load(cls, settings: CacheSettings | None = None, models_dir: Path | None = None) -> Embedder:
        """The prepared ONNX model (exported on first use when missing), configured by ``settings``."""
        settings = settings or CacheSettings()
        models_dir = Path(models_dir) if models_dir is not None else default_models_dir()
        path = onnx_model_path(models_dir, int8=settings.embed_int8)
        if not path.is_file():
            log.info("exporting the embedding model to ONNX at %s (one time)", path.parent)
            try:
                export_embedder(models_dir)
            except ModelError as exc:
                raise EmbedderError(f"the embedding model is not prepared: {exc.message}") from exc
        return cls(path, settings)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: shape (len(texts), 384), rows L2-normalised.

        Texts of similar length run together (at most ``run_rows`` of them), in runs of at most
        ``_RUN_BUDGET`` rows x tokens squared (attention's buffers grow with it): ONNX Runtime
        keeps the buffers of the largest run it has seen. Sorting by length also pads less.
        """
        out = np.empty((len(texts), DIM), dtype=np.float32)
        self.embed_runs(texts, out.__setitem__)  # each run's rows filled in as it ends
        return out

    def embed_runs(
        self,
        texts: Sequence[str],
        done: Callable[[list[int], np.ndarray], None],
        wanted: Callable[[int], bool] | None = None,
    ) -> None:
        """:meth:`embed_batch` one model run at a time, shortest texts first: ``done(rows, vecs)``
        after each run, so the texts of a short run need not wait for the long ones. A text for
        which ``wanted(row)`` turns False before its run (its caller left) is not run."""
        if not texts:
            return
        encodings = self._tokenizer.encode_batch([t if t else " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: _length(encodings[i]))  # ids are padded
        rows_max = self.run_rows or len(order)
        start = 0
        while start < len(order):
            stop = start + 1
            # Longest so far is the last one (sorted): the run's padded length.
            while (
                stop < len(order) and stop - start < rows_max
                and (stop - start + 1) * _length(encodings[order[stop]]) ** 2 <= _RUN_BUDGET
            ):
                stop += 1
            rows = order[start:stop] if wanted is None else [i for i in order[start:stop] if wanted(i)]
            if rows:
                vecs = self._run([encodings[i] for i in rows])
                with self._lock:  # counted before the run's callers are answered
                    self.texts += len(rows)
                done(rows, vecs)
            start = stop

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as the model reads it: truncated to its 256, [CLS] and [SEP] included."""
        return [_length(e) for e in self._tokenizer.encode_batch([t if t else " " for t in texts])]

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """Whether each text is longer than the model reads (its tokens past 256 are cut)."""
        return [bool(e.overflowing) for e in self._tokenizer.encode_batch(list(texts))]

    def warm(self) -> None:
        """Run the largest shape a run may have, so the node's footprint is its steady one from
        the start (ONNX Runtime allocates a shape's buffers on first use)."""
        length = MAX_TOKENS
        while length >= 8:
            rows = min(self.max_batch, max(1, _RUN_BUDGET // (length * length)))
            self.embed_batch([" ".join(["word"] * (length - 2))] * rows)
            length //= 2

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(_length(e) for e in encodings)
        ids = np.asarray([e.ids[:width] for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask[:width] for e in encodings], dtype=np.int64)
        with self._lock:  # counted before the run's texts are answered
            self.runs += 1
        try:
            # The export (models/onnx_export.py) pools in the graph: its sentence_embedding output.
            out = self._session.run(
                ["sentence_embedding"], {"input_ids": ids, "attention_mask": mask}, self._run_options
            )[0]
        except Exception as exc:  # onnxruntime's errors have no common public base
            raise EmbedderError(f"the embedding model failed: {exc}") from exc
        vecs = np.asarray(out, dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return vecs

    async def embed(self, text: str, key: str = "") -> np.ndarray:
        """One text's embedding; concurrent calls queue together and are picked round robin across
        ``key`` (the tenant), several to a model run where the model allows (``run_rows``)."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self, loop)
        return await batcher.submit(text, key)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def onnx_session(
    model: Path, threads: int, providers: Sequence[str] = ("CPUExecutionProvider",)
) -> tuple[Any, Any, set[str]]:
    """An ONNX Runtime session on ``threads`` cores, the options to run it with and its input names
    (the embedder's and the verifier's)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Memory patterns are planned per input shape and kept: with inputs of every length they
    # only add up, at no gain in speed.
    opts.enable_mem_pattern = False
    session = ort.InferenceSession(str(model), opts, providers=list(providers))
    # ONNX Runtime's arena keeps every region it grew to, and prompts of every length fragment
    # it; shrunk after each run, it gives its free regions back (the serve command makes glibc
    # return them to the system, edgeroute/cli.py). Without an arena a batch ran 3x slower.
    run_options = ort.RunOptions()
    run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return session, run_options, {i.name for i in session.get_inputs()}


def _length(encoding: Any) -> int:
    """Real tokens of an encoding (the tokenizer pads every text to the batch's longest)."""
    return int(sum(encoding.attention_mask))


# Most rows x tokens^2 in one model run (see Embedder.embed_batch): 32 texts of 128 tokens,
# 2 of 512.
_RUN_BUDGET = 32 * 128 * 128

# Most rows x padded tokens in one run of ``embed`` calls. A run's time is its padded tokens
# whatever the rows, so small runs cost little, and a question that arrives while a run goes on
# waits for all of it: 256 tokens is one text of the model's longest.
RUN_TOKENS = 256
# Times a waiting text may be passed over for shorter ones before it goes first.
MAX_SKIPS = 2


@dataclass(eq=False, slots=True)
class _Text:
    text: str
    key: str
    future: asyncio.Future[np.ndarray]
    skipped: int = field(init=False, default=0)

    @property
    def tokens(self) -> int:
        """An estimate from the length (tokenizing stays off the event loop)."""
        return min(MAX_TOKENS, 2 + len(self.text) // 4)


def pick_run(
    pending: list[_Text], max_batch: int, budget: int = RUN_TOKENS, rows: int | None = None
) -> list[_Text]:
    """The texts of the next model run, out of ``pending`` (oldest first).

    Up to ``max_batch`` are taken in turn across keys (a :class:`FairQueue`'s); of those the
    shortest run first, up to ``budget`` rows x padded tokens and ``rows`` texts, except that a
    text passed over ``MAX_SKIPS`` times goes before them. So a short question waits one short
    run, not a tenant's queue of long prompts, and a long prompt waits at most a few short runs.
    """
    turns: FairQueue[_Text] = FairQueue()
    for p in pending:
        turns.push(p)
    taken = {id(turns.pop({})) for _ in range(min(max_batch, len(pending)))}
    candidates = [p for p in pending if id(p) in taken]  # in their order
    # Stable: the passed-over go first, oldest first; the rest shortest first, oldest on ties.
    candidates.sort(key=lambda p: (1, p.tokens) if p.skipped < MAX_SKIPS else (0, 0))
    run: list[_Text] = []
    width = 0
    for p in candidates:
        if run and ((len(run) + 1) * max(width, p.tokens) > budget or len(run) == rows):
            break
        run.append(p)
        width = max(width, p.tokens)
    for p in candidates[len(run):]:
        p.skipped += 1
    return run


class _Batcher:
    """The micro-batching queue of one event loop."""

    def __init__(self, embedder: Embedder, loop: asyncio.AbstractEventLoop) -> None:
        self._embedder = embedder
        self._loop = loop
        self._pending: list[_Text] = []
        self._timer: asyncio.Handle | None = None
        self._busy = False

    def submit(self, text: str, key: str = "") -> asyncio.Future[np.ndarray]:
        fut: asyncio.Future[np.ndarray] = self._loop.create_future()
        self._pending.append(_Text(text, key, fut))
        if self._busy:
            return fut  # picked up when the running batch finishes
        if len(self._pending) >= self._embedder.max_batch:
            self._flush()
        elif self._timer is None:
            # Window 0 waits one turn of the event loop: calls made together (gather, requests
            # parsed in the same tick) share a run at no cost; a timer's granularity is ~1 ms.
            wait = self._embedder.window_s
            self._timer = self._loop.call_later(wait, self._flush) if wait else self._loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = [p for p in self._pending if not p.future.done()]
        if self._busy or not self._pending:
            return
        # One run at a time, picked anew as texts arrive: a question that comes during a long
        # batch does not wait for all of it.
        batch = pick_run(self._pending, self._embedder.max_batch, rows=self._embedder.run_rows)
        chosen = set(map(id, batch))
        self._pending = [p for p in self._pending if id(p) not in chosen]
        self._busy = True

        def ran(rows: list[int], vecs: np.ndarray) -> None:  # on the executor's thread
            self._loop.call_soon_threadsafe(self._settle, batch, rows, vecs)

        def wanted(row: int) -> bool:  # on the executor's thread; a cancelled caller's text is skipped
            return not batch[row].future.done()

        run = self._loop.run_in_executor(
            self._embedder._executor, self._embedder.embed_runs, [p.text for p in batch], ran, wanted
        )
        run.add_done_callback(lambda done: self._finish(batch, done))

    @staticmethod
    def _settle(batch: list[_Text], rows: list[int], vecs: np.ndarray) -> None:
        # Each model run's texts are answered as it ends: a short question in a batch with long
        # prompts waits for its own run, not the batch.
        for row, vec in zip(rows, vecs, strict=True):
            if not batch[row].future.done():
                batch[row].future.set_result(vec)

    def _finish(self, batch: list[_Text], done: asyncio.Future[Any]) -> None:
        # Runs on the loop after every ``_settle`` of the batch (call_soon_threadsafe keeps order).
        self._busy = False
        exc = done.exception() if not done.cancelled() else EmbedderError("the embedding run was cancelled")
        for fut in (p.future for p in batch):
            if not fut.done():
                fut.set_exception(exc or EmbedderError("the embedding run gave no vector"))
        if self._pending:
            self._flush()
