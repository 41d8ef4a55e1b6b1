"""Rank 0's scheduler: requests queue FIFO and run one at a time on a worker thread.

The worker thread owns the model (and, with tensor parallelism, the process group): it
broadcasts each request to the other ranks, decodes in lockstep with them, and hands text pieces
back to each request's event loop. Any failure inside a lockstep generation leaves the ranks out
of step, so with more than one rank it is fatal and the member goes down (a supervisor restarts it).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from models import SamplingParams, TokenLogprob
from models.logprobs import token_logprob
from models.stops import StopMatcher
from models.worker import Job, ModelWorker

from ..config import MemberServerSettings
from ..errors import BadRequestError, OverloadedError, RankFailureError
from .decode import Penalties, Repeat, Sequence, add_bias, choose_token
from .grammar import Grammar, Grammars
from .group import Command, Lockstep
from .metrics import MemberMetrics
from .text import DeltaDecoder

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Plan:
    """One validated generation: prompt token ids, sampling parameters, the JSON grammar if any."""

    ids: tuple[int, ...]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stops: tuple[str, ...]
    grammar: Grammar | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seen: tuple[int, ...] = ()  # a continuation's answer so far, which the penalties count
    logprobs: int | None = None  # log probabilities wanted, with this many alternatives a token
    logit_bias: tuple[tuple[int, float], ...] = ()
    top_k: int | None = None  # None: all tokens (the member's default)
    min_p: float | None = None
    repeat_penalty: float = 1.0


@dataclass(frozen=True, slots=True)
class Piece:
    """Text for the client; the last piece has ``finish_reason`` and the token counts."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()
    stop_word: str | None = None  # the stop sequence that ended the answer (vLLM's stop_reason)


class TorchEngine(ModelWorker[Plan]):
    """The served model behind a FIFO queue, with vLLM-style load numbers for `/metrics`."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        group: Lockstep,
        settings: MemberServerSettings,
        metrics: MemberMetrics,
        on_fatal: Callable[[str], None],
    ) -> None:
        super().__init__("member-engine", idle_s=settings.heartbeat_s)
        self._model = model
        self._tok = tokenizer
        self._group = group
        self._settings = settings
        self._metrics = metrics
        self._on_fatal = on_fatal
        eos = {tokenizer.eos_token_id} | set(_as_list(getattr(model.generation_config, "eos_token_id", None)))
        self._eos = {int(t) for t in eos if t is not None}
        vocab_size = getattr(model.config, "vocab_size", None)
        self._grammars = Grammars(tokenizer, vocab_size, sorted(self._eos))
        self._lock = threading.Lock()
        self._waiting = 0
        self._running = 0
        self.alive = True
        self.fatal_reason: str | None = None
        metrics.bind_load(lambda: self._running, lambda: self._waiting)
        self.start()

    @property
    def dtype(self) -> str:
        """The weights' dtype as loaded (``bfloat16``, ``float32``...)."""
        return str(self._model.dtype).removeprefix("torch.")

    # -- prompts ---------------------------------------------------------------------------

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self._tok, "chat_template", None))

    def encode_chat(
        self, messages: list[dict[str, str]], *, add_generation_prompt: bool, continue_final_message: bool
    ) -> list[int]:
        """Apply the chat template; ``continue_final_message`` leaves the last assistant turn open."""
        if not self.has_chat_template:
            raise BadRequestError("this model has no chat template; use /v1/completions", param="messages")
        if continue_final_message and (add_generation_prompt or messages[-1]["role"] != "assistant"):
            raise BadRequestError(
                "continue_final_message needs add_generation_prompt false and a final assistant message",
                param="continue_final_message",
            )
        text = self._tok.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
        )
        return list(self._tok(text, add_special_tokens=False).input_ids)

    def _piece(self, token: int) -> bytes:
        return self._tok.decode([token]).encode("utf-8")

    def encode_prompt(self, prompt: str) -> list[int]:
        return list(self._tok(prompt).input_ids)

    def plan(self, ids: list[int], params: SamplingParams, *, param: str, prefix: str = "") -> Plan:
        """Check the prompt fits the context window, as vLLM does (a 400, never a truncation), and
        compile ``response_format``'s schema; ``prefix`` is the answer so far a continuation extends."""
        limit = self._settings.max_model_len
        max_tokens = params.max_tokens
        wanted = max_tokens if max_tokens is not None else self._settings.default_max_tokens
        if not ids:
            raise BadRequestError("the prompt is empty", param=param)
        if len(ids) + (max_tokens or 0) > limit or len(ids) >= limit:
            raise BadRequestError(
                f"this model's maximum context length is {limit} tokens; the prompt has {len(ids)} tokens"
                + (f" and max_tokens is {max_tokens}" if max_tokens is not None else ""),
                param=param,
                code="context_length_exceeded",
            )
        wanted = min(wanted, limit - len(ids))
        if params.logit_bias and not all(0 <= t < len(self._tok) for t, _ in params.logit_bias):
            raise BadRequestError(f"logit_bias: this model's token ids run from 0 to {len(self._tok) - 1}", param="logit_bias")
        schema = params.json_schema
        grammar = self._grammars.compile(schema, prefix) if schema is not None else None
        seen = tuple(self._tok(prefix, add_special_tokens=False).input_ids) if prefix and params.penalized else ()
        return Plan(
            tuple(ids), wanted, params.temperature, params.top_p, params.seed, params.stop, grammar,
            params.frequency_penalty, params.presence_penalty, seen, params.logprobs, params.logit_bias,
            params.top_k, params.min_p, params.repeat_penalty,
        )

    # -- requests --------------------------------------------------------------------------

    def load(self) -> tuple[int, int]:
        with self._lock:
            return self._running, self._waiting

    def submit(self, plan: Plan) -> Job[Plan]:
        """Queue a generation now, so a full queue is refused before any byte is streamed."""
        if not self.alive:
            raise RankFailureError(f"the member is going down: {self.fatal_reason}", code="rank_failure")
        with self._lock:
            if self._waiting >= self._settings.max_waiting:
                raise OverloadedError(
                    f"the member's queue is full ({self._waiting} waiting)", code="overloaded"
                )
            self._waiting += 1
        return self.enqueue(plan)

    def pieces(self, job: Job[Plan]) -> AsyncIterator[Piece]:
        """The job's text as it is decoded; leaving early cancels the generation."""
        return self.output(job)

    def close(self, timeout: float = 30.0) -> None:
        """Tell the other ranks to stop and wait for the worker thread."""
        self.stop(timeout)

    # -- the worker thread -----------------------------------------------------------------

    def context(self) -> contextlib.AbstractContextManager[Any]:
        import torch

        return torch.inference_mode()

    def idle(self) -> None:
        self._group.send(Command("heartbeat"))

    def stopping(self) -> None:
        self._group.send(Command("shutdown"))

    def failed(self, job: Job[Plan] | None, exc: Exception) -> bool:
        if self._group.world_size > 1:
            self._die(f"tensor-parallel step failed: {exc}", job)
            return False
        log.exception("generation failed", exc_info=exc)
        if job is not None:
            job.emit(RankFailureError(f"generation failed: {exc}", code="generation_failed"))
        return True

    def serve(self, job: Job[Plan]) -> None:
        with self._lock:
            self._waiting -= 1
            self._running = 1
        try:
            if not job.cancelled.is_set():
                self._metrics.queued(time.perf_counter() - job.queued_at)
                self._generate(job)
        finally:
            with self._lock:
                self._running = 0

    def _generate(self, job: Job[Plan]) -> None:
        import torch

        plan = job.payload
        started = time.perf_counter()
        matcher = plan.grammar.matcher() if plan.grammar is not None else None  # before the ranks start
        penalties = None
        if plan.frequency_penalty or plan.presence_penalty:
            penalties = Penalties(plan.frequency_penalty, plan.presence_penalty, plan.seen, len(self._tok))
        repeat = Repeat(plan.repeat_penalty, plan.ids) if plan.repeat_penalty != 1.0 else None
        self._group.send(Command("generate", plan.ids))
        seq = Sequence(self._model)
        logits = seq.prefill(list(plan.ids))
        generator = torch.Generator().manual_seed(
            plan.seed if plan.seed is not None else random.getrandbits(63)
        )
        decoder = DeltaDecoder(self._tok)
        stops = StopMatcher(plan.stops)
        n_out = 0
        first_at: float | None = None
        finish: str | None = "length"
        held: list[TokenLogprob] = []  # log probabilities of the tokens whose text is held back
        while True:
            if job.cancelled.is_set():
                finish = None
                break
            raw = logits
            if plan.logit_bias:
                logits = add_bias(logits, plan.logit_bias)
            if penalties is not None:
                logits = penalties.apply(logits)
            if repeat is not None:
                logits = repeat.apply(logits)
            if matcher is not None:
                if logits is raw and plan.logprobs is not None:
                    logits = logits.clone()  # log probabilities are the model's, before the mask
                matcher.mask(logits)  # end-of-sequence only once the JSON is complete
            token = choose_token(logits, plan.temperature, plan.top_p, generator, plan.top_k, plan.min_p)
            if token in self._eos:
                finish = "stop"
                break
            if matcher is not None:
                matcher.accept(token)
            if penalties is not None:
                penalties.count(token)
            if repeat is not None:
                repeat.count(token)
            n_out += 1
            if plan.logprobs is not None:
                held.append(token_logprob(raw.float().cpu().numpy(), token, plan.logprobs, self._piece))
            text, hit = stops.feed(decoder.feed(token))
            if text:
                if first_at is None:
                    first_at = time.perf_counter()
                job.emit(Piece(text, logprobs=tuple(held)))
                held = []
            if hit:
                finish = "stop"
                break
            if n_out >= plan.max_tokens:
                break
            self._group.step(token)
            logits = seq.advance(token)
        self._group.step(stop=True)
        if finish is None:
            return
        tail = "" if stops.hit else stops.flush(decoder.flush())
        job.emit(Piece(tail, finish, len(plan.ids), n_out, tuple(held) if tail else (), stops.matched))
        done = time.perf_counter()
        self._metrics.finished(
            finish, len(plan.ids), n_out, ttft=(first_at or done) - started, e2e=done - job.queued_at
        )

    def _die(self, reason: str, current: Job[Plan] | None) -> None:
        log.error("member going down: %s", reason)
        self.alive = False
        self.fatal_reason = reason
        doomed = ([current] if current is not None else []) + self.drain()
        for job in doomed:
            job.emit(RankFailureError(f"the member is going down: {reason}", code="rank_failure"))
            job.done()
        self._on_fatal(reason)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple | set) else [value]
