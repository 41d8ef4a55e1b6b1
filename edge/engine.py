"""The edge engine: one llama.cpp model, loaded once, served to concurrent requests.

``llama_cpp.Llama`` is not thread-safe, so one worker thread owns it and runs requests one at a
time from a FIFO queue; tokens travel back to each request's event loop as they are decoded.
Tokenizing and detokenizing only read the vocabulary and run on the callers' threads, as the
llama.cpp server does.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import random
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models import Chunk, EngineLoad, GenerationRequest, ModelSpec, Usage

from .config import EdgeSettings
from .errors import (
    EdgeSaturatedError,
    EngineClosedError,
    EngineLoadError,
    GenerationError,
    PromptTooLongError,
)
from .text import IncrementalDecoder, StopMatcher

log = logging.getLogger(__name__)

_DONE = object()


@dataclass
class _Job:
    tokens: list[int]
    max_tokens: int
    request: GenerationRequest
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[Any]
    cancelled: threading.Event = field(default_factory=threading.Event)

    def emit(self, item: Any) -> None:
        self.loop.call_soon_threadsafe(self.out.put_nowait, item)


class LlamaEngine:
    """The INT4 model on the box behind the :class:`models.Engine` interface."""

    name = "edge"

    def __init__(self, spec: ModelSpec, settings: EdgeSettings) -> None:
        self.spec = spec
        self.settings = settings
        self._llm = _load_llama(spec.path, settings)
        self.n_ctx: int = self._llm.n_ctx()
        self._eos = self._llm.token_eos()
        self._formatter = _chat_formatter(self._llm) if spec.chat_template else None
        import llama_cpp

        vocab = self._llm._model.vocab
        self._is_eog = lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token))
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._waiting = 0
        self._running = 0
        self._lock = threading.Lock()
        self._closed = False
        # Routing counts every prompt's tokens, and repeats (cache hits) are common: remember
        # the counts of recent prompts rather than tokenize the same text again.
        self._count_text = functools.lru_cache(maxsize=512)(
            lambda text, add_bos: len(self.tokenize(text, add_bos=add_bos))
        )
        self._worker = threading.Thread(target=self._run, name="llama-worker", daemon=True)
        self._worker.start()

    # -- the public interface --------------------------------------------------------------

    def load(self) -> EngineLoad:
        with self._lock:
            return EngineLoad(running=self._running, waiting=self._waiting, capacity=1)

    def render_prompt(self, request: GenerationRequest) -> str:
        """The exact text given to the model: the chat template applied, then any prefix."""
        if request.messages is None:
            return (request.prompt or "") + request.assistant_prefix
        if self._formatter is None:
            # A base model has no chat template: a plain transcript is the honest fallback.
            lines = [f"{m['role']}: {m['content']}" for m in request.messages]
            return "\n".join(lines) + "\nassistant: " + request.assistant_prefix
        rendered = self._formatter(messages=list(request.messages))
        return rendered.prompt + request.assistant_prefix

    def tokenize(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids; ``add_bos`` defers to the model's own add-BOS flag, as llama.cpp does."""
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def prompt_tokens(self, request: GenerationRequest) -> list[int]:
        return self.tokenize(*self._prompt_text(request))

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return self._count_text(*self._prompt_text(request))

    def _prompt_text(self, request: GenerationRequest) -> tuple[str, bool]:
        # A rendered chat template already carries its special tokens: no BOS of our own.
        templated = request.is_chat and self._formatter is not None
        return self.render_prompt(request), not templated

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        """Queue the request and yield its tokens as the worker decodes them."""
        job = self._admit(request)
        try:
            while True:
                item = await job.out.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # The consumer went away (client disconnect, fallback): stop decoding for nobody.
            job.cancelled.set()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        await asyncio.to_thread(self._worker.join, 30)
        self._llm.close()

    # -- internals -------------------------------------------------------------------------

    def _admit(self, request: GenerationRequest) -> _Job:
        if self._closed:
            raise EngineClosedError("the edge engine is closed")
        # An empty prompt is valid (OpenAI completes from the start of a document); llama.cpp
        # needs at least one token, so it starts from BOS.
        tokens = self.prompt_tokens(request) or [self._llm.token_bos()]
        n_prompt = len(tokens)
        wanted = request.params.max_tokens
        if n_prompt >= self.n_ctx or (wanted is not None and n_prompt + wanted > self.n_ctx):
            asked = f" + max_tokens {wanted}" if wanted is not None else ""
            raise PromptTooLongError(
                f"this model's context window is {self.n_ctx} tokens; the prompt has {n_prompt} tokens"
                f"{asked}. Shorten the messages or lower max_tokens.",
                param="messages" if request.is_chat else "prompt",
                code="context_length_exceeded",
            )
        max_tokens = wanted if wanted is not None else self.settings.default_max_tokens
        max_tokens = min(max_tokens, self.n_ctx - n_prompt)
        with self._lock:
            if self._waiting >= self.settings.max_queue:
                raise EdgeSaturatedError(
                    f"the edge queue is full ({self._waiting} waiting)", code="edge_saturated"
                )
            self._waiting += 1
        job = _Job(tokens, max_tokens, request, asyncio.get_running_loop(), asyncio.Queue())
        self._jobs.put(job)
        return job

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._lock:
                self._waiting -= 1
                self._running = 1
            try:
                if not job.cancelled.is_set():
                    self._generate(job)
            except Exception as exc:  # noqa: BLE001 - every failure must reach the request
                log.exception("generation failed")
                job.emit(GenerationError(f"the edge model failed: {exc}"))
            finally:
                with self._lock:
                    self._running = 0
                job.emit(_DONE)

    def _generate(self, job: _Job) -> None:
        params = job.request.params
        self._llm.set_seed(params.seed if params.seed is not None else random.getrandbits(31))
        if params.seed is not None:
            # Reusing a cached prefix changes the decode batch shape and so the logits' last bits;
            # a seeded request must replay exactly, so it evaluates its whole prompt afresh.
            self._llm.reset()
        decoder = IncrementalDecoder(self._llm)
        stops = StopMatcher(params.stop)
        n_out = 0
        finish = "length"
        for token in self._llm.generate(
            job.tokens,
            temp=params.temperature,
            top_p=params.top_p,
            top_k=40,
            min_p=0.05,
            repeat_penalty=1.0,
            reset=True,
        ):
            if job.cancelled.is_set():
                return
            if token == self._eos or self._is_eog(token):
                finish = "stop"
                break
            n_out += 1
            text, hit = stops.feed(decoder.feed(token))
            if text:
                job.emit(Chunk(text))
            if hit:
                finish = "stop"
                break
            if n_out >= job.max_tokens:
                break
        else:
            finish = "length"
        tail = "" if stops.hit else stops.flush(decoder.flush())
        job.emit(Chunk(tail, finish_reason=finish, usage=Usage(len(job.tokens), n_out)))


def _load_llama(path: Path, settings: EdgeSettings) -> Any:
    try:
        from llama_cpp import Llama

        return Llama(
            model_path=str(path),
            n_ctx=settings.n_ctx,
            n_threads=settings.n_threads,
            n_batch=settings.n_batch,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise EngineLoadError(f"llama.cpp could not load {path}: {exc}") from exc


def _chat_formatter(llm: Any) -> Any:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    vocab = llm._model
    eos = vocab.token_get_text(llm.token_eos())
    bos = vocab.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
    return Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
