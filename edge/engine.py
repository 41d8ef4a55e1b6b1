"""The edge engine: one llama.cpp model, loaded once, served to concurrent requests.

A scheduler thread decodes the running requests together (:mod:`edge._scheduler`); the rest wait
in a bounded queue shared fairly across the requests' ``fair_key`` (:mod:`edge._fair`).
Tokenizing and detokenizing only read the vocabulary and run on the callers' threads, as the
llama.cpp server does.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from models import Chunk, EngineLoad, GenerationRequest, ModelSpec

from ._grammar import advance, gbnf_for, grammar_sampler
from ._grammar import free as free_grammar
from ._runtime import Runtime
from ._scheduler import Scheduler, EngineStats
from ._sequence import DONE, Job
from .config import EdgeSettings
from .errors import EngineClosedError, LogitBiasError, PromptTooLongError, ResponseFormatError


class LlamaEngine:
    """The INT4 model on the box behind the :class:`models.Engine` interface."""

    name = "edge"

    def __init__(self, spec: ModelSpec, settings: EdgeSettings) -> None:
        self.spec = spec
        self.settings = settings
        self._rt = Runtime(spec.path, settings)
        self.n_ctx: int = self._rt.n_ctx_slot  # one request's window (each slot has its own)
        self._vocab = self._rt.vocab
        self.chat_template = self._rt.chat_template  # the model's own (Jinja); "" for a base model
        self._formatter = None
        if spec.chat_template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            eos, bos = self._vocab.eos, self._vocab.bos
            self._formatter = Jinja2ChatFormatter(
                template=self.chat_template, eos_token=self._vocab.token_text(eos),
                bos_token=self._vocab.token_text(bos) if bos >= 0 else "",
            )
        self._closed = False
        # Routing counts every prompt's tokens, and repeats (cache hits) are common: remember
        # the tokens of recent prompts rather than tokenize the same text again.
        self._tokens_of = functools.lru_cache(maxsize=512)(
            lambda text, add_bos: tuple(self.tokenize(text, add_bos=add_bos))
        )
        self._scheduler = Scheduler(self._rt, settings)
        self._longest_piece = self._vocab.longest_piece()

    # -- the public interface --------------------------------------------------------------

    def load(self) -> EngineLoad:
        """Running and waiting requests (as one tenant sees them: :attr:`Prepared.queue`)."""
        s = self._scheduler.stats()
        return EngineLoad(running=s.running, waiting=s.waiting, capacity=s.slots)

    def stats(self) -> EngineStats:
        """Counters of the scheduler: reused prefix tokens, completions, recent request time."""
        return self._scheduler.stats()

    def tokenize(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids; ``add_bos`` defers to the model's own add-BOS flag, as llama.cpp does."""
        return self._vocab.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def detokenize(self, tokens: list[int]) -> bytes:
        """The bytes of ``tokens`` (special tokens left out, as in an answer)."""
        return self._vocab.detokenize(tokens)

    def text_of_prompt(self, tokens: list[int]) -> str:
        """The text a token-id prompt stands for: special tokens written out, so that tokenizing it
        (as a prompt is) gives the ids back; a leading BOS is dropped where the model adds its own."""
        bos = self._vocab.bos
        if tokens and bos >= 0 and tokens[0] == bos and self.tokenize("")[:1] == [bos]:
            tokens = tokens[1:]
        return self._vocab.detokenize(tokens, special=True).decode("utf-8", errors="replace")

    def piece(self, token: int) -> bytes:
        return self._vocab.piece(token)

    @property
    def n_vocab(self) -> int:
        return self._vocab.n_vocab

    def prompt_tokens(self, request: GenerationRequest) -> list[int]:
        return self.tokenize(*self._prompt_text(request))

    def min_prompt_tokens(self, request: GenerationRequest) -> int:
        """A lower bound of the prompt's tokens from its length alone (no template, no tokenizer):
        a prompt whose bound is already beyond the window is refused without rendering it."""
        if request.messages is None:
            chars = len(request.prompt or "")
        else:
            chars = sum(len(m["content"]) for m in request.messages)
        # A character is at least one byte, and a token holds at most the longest piece's bytes.
        return (chars + len(request.assistant_prefix)) // self._longest_piece

    def prepare(self, request: GenerationRequest, prompt_tokens: int | None = None) -> Prepared:
        """Everything the router asks of the edge before it generates, in one call (a caller may
        make it on a worker thread: it renders and tokenizes the prompt).

        ``prompt_tokens``: a count already known (a cached answer's), taken as it is: nothing is
        rendered. A prompt whose length alone puts it beyond the window is not rendered either.
        """
        tokens: tuple[int, ...] | None = None
        at_least = False
        if prompt_tokens is None:
            floor = self.min_prompt_tokens(request)
            if floor >= self.n_ctx:
                prompt_tokens, at_least = floor, True
            else:
                tokens = self._tokens_of(*self._prompt_text(request))
                prompt_tokens = len(tokens)
        view = self._scheduler.view(request.fair_key)
        return Prepared(
            engine=self,
            request=request,
            prompt_tokens=prompt_tokens,
            tokens=tokens,
            n_ctx=self.n_ctx,
            queue=EngineLoad(running=view.running, waiting=view.ahead, capacity=view.slots),
            wait_s=view.wait_s(),
            too_long=self._too_long(request, prompt_tokens, at_least),
        )

    def _too_long(
        self, request: GenerationRequest, n_prompt: int, at_least: bool = False
    ) -> PromptTooLongError | None:
        """The context-window check: the prompt (``at_least``: a lower bound of it) and the
        requested tokens must fit one request's window."""
        wanted = request.params.max_tokens
        if n_prompt < self.n_ctx and (wanted is None or n_prompt + wanted <= self.n_ctx):
            return None
        asked = f" + max_tokens {wanted}" if wanted is not None else ""
        return PromptTooLongError(
            f"this model's context window is {self.n_ctx} tokens; the prompt has "
            f"{'at least ' if at_least else ''}{n_prompt} tokens{asked}. "
            "Shorten the messages or lower max_tokens.",
            param="messages" if request.is_chat else "prompt",
            code="context_length_exceeded",
        )

    def _prompt_text(self, request: GenerationRequest) -> tuple[str, bool]:
        """The exact text given to the model (the chat template applied, then any prefix), and
        whether to add a BOS: a rendered chat template already carries its special tokens."""
        if request.messages is None:
            return (request.prompt or "") + request.assistant_prefix, True
        if self._formatter is None:
            # A base model has no chat template: a plain transcript is the honest fallback.
            lines = [f"{m['role']}: {m['content']}" for m in request.messages]
            return "\n".join(lines) + "\nassistant: " + request.assistant_prefix, True
        return self._formatter(messages=list(request.messages)).prompt + request.assistant_prefix, False

    async def stream(
        self, request: GenerationRequest, tokens: Sequence[int] | None = None
    ) -> AsyncIterator[Chunk]:
        """Queue the request and yield its tokens as the scheduler decodes them (``tokens``: its
        prompt's, counted before by :meth:`prepare`)."""
        gbnf = None
        if request.params.json_schema is not None:
            # Off the event loop: a large schema's grammar takes tens of milliseconds to build.
            gbnf = await asyncio.to_thread(self._grammar, request)
        job = self._admit(request, gbnf, tokens)
        try:
            while (item := await job.out.get()) is not DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # The consumer went away (client disconnect, fallback): the scheduler frees the slot
            # at its next step instead of decoding for nobody.
            if not job.cancelled.is_set():
                job.cancelled.set()
                self._scheduler.wake()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._scheduler.stop, 30)
        self._rt.close()

    # -- internals -------------------------------------------------------------------------

    def _admit(
        self, request: GenerationRequest, gbnf: str | None = None, prompt: Sequence[int] | None = None
    ) -> Job:
        if self._closed:
            raise EngineClosedError("the edge engine is closed")
        # An empty prompt is valid (OpenAI completes from the start of a document); llama.cpp
        # needs at least one token, so it starts from BOS.
        tokens = (list(prompt) if prompt is not None else self.prompt_tokens(request)) or [self._vocab.bos]
        n_prompt = len(tokens)
        too_long = self._too_long(request, n_prompt)
        if too_long is not None:
            raise too_long
        wanted = request.params.max_tokens
        bias = request.params.logit_bias
        if bias and not all(0 <= token < self._vocab.n_vocab for token, _ in bias):
            raise LogitBiasError(
                f"logit_bias: this model's token ids run from 0 to {self._vocab.n_vocab - 1}", param="logit_bias"
            )
        max_tokens = wanted if wanted is not None else self.settings.default_max_tokens
        max_tokens = min(max_tokens, self.n_ctx - n_prompt)
        seed = request.params.seed if request.params.seed is not None else random.getrandbits(31)
        job = Job(tokens, max_tokens, request, seed, asyncio.get_running_loop(), asyncio.Queue())
        job.grammar = gbnf
        if gbnf is not None or request.params.penalized:
            job.answer_so_far = self._answer_so_far(request)
        self._scheduler.submit(job)
        return job

    def _answer_so_far(self, request: GenerationRequest) -> list[int]:
        """A continuation's answer so far, which a grammar or penalties count as generated."""
        return self._vocab.tokenize(request.assistant_prefix.encode("utf-8"), False, False)

    def _grammar(self, request: GenerationRequest) -> str:
        """The schema's grammar, checked here (a 400 before any slot is taken): it parses, and
        a continuation's answer so far is a valid start of it."""
        named = request.params.schema_field  # where the schema came from (``tools``: the tools' calls)
        try:
            gbnf = gbnf_for(request.params.json_schema or "")
            probe = grammar_sampler(self._vocab.ptr, gbnf)
            try:
                if not advance(probe, self._answer_so_far(request)):
                    raise ResponseFormatError(
                        "response_format: the answer to continue does not match the schema", param="response_format"
                    )
            finally:
                free_grammar(probe)
        except ResponseFormatError as exc:
            if exc.param == named:
                raise
            raise ResponseFormatError(exc.message.replace(str(exc.param), named, 1), param=named) from exc
        return gbnf


@dataclass(eq=False, kw_only=True)
class Prepared:
    """The edge's answer to :meth:`LlamaEngine.prepare`, and the edge's target for that request.

    ``prompt_tokens`` is exact when ``tokens`` are given; else a cached answer's count, or (with
    ``too_long`` set) a lower bound. ``queue`` and ``wait_s`` are the edge's load as the
    request's tenant sees it (``wait_s`` None: no estimate yet). Streaming the request it was
    prepared for admits it with ``tokens``; any other (a continuation) is tokenized anew.
    """

    name: ClassVar[str] = "edge"
    engine: LlamaEngine = field(repr=False)
    request: GenerationRequest
    prompt_tokens: int
    tokens: tuple[int, ...] | None
    n_ctx: int
    queue: EngineLoad
    wait_s: float | None
    too_long: PromptTooLongError | None

    def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        return self.engine.stream(request, self.tokens if request is self.request else None)

    async def aclose(self) -> None:
        return None  # the engine is the node's, closed with it
