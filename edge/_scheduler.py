"""Continuous batching: one thread owns the llama.cpp context and steps every active sequence.

Each step builds one ``llama_batch``: the next token of every sequence that is decoding, then up
to ``prefill_chunk`` prompt tokens of sequences still reading their prompt (shortest remaining
prompt first, so a one-line question is not stuck behind a long document). One ``llama_decode``
runs them all; each sequence that asked for logits samples its own token from its own row with
its own sampler (greedy ones: the argmax of their rows, by numpy). Requests join between steps
and leave as soon as they finish or are cancelled. A step's output reaches the requests' event
loops in one wakeup (:class:`Outbox`).
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from dataclasses import dataclass

from models import REPEAT_WINDOW, Chunk
from models.logprobs import token_logprob

from ._fair import (
    Demand, FairQueue, KeyView, Promises, active_keys, keep_slots, preempt_from, prefill_shares, share,
)
from ._grammar import Constrained, advance, free, grammar_sampler
from ._runtime import Runtime, logit_bias_sampler, penalties_sampler, sampler_chain
from ._sequence import DONE, Job, Outbox, Slot
from .config import EdgeSettings
from .errors import EdgeSaturatedError, GenerationError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Counters since start; the router exports them (``/metrics``) and estimates waits from them."""

    running: int
    waiting: int
    slots: int
    mean_request_s: float | None  # mean slot time of the recent finished requests
    # The counters (the scheduler's ``_counts``):
    prompt_tokens: int = 0  # prompt tokens of the requests that started
    prefix_reused_tokens: int = 0  # of those, tokens whose KV was already in the slot
    prefill_tokens: int = 0  # prompt tokens evaluated (prompt_tokens - reused, less what was cancelled)
    completed: int = 0
    cancelled: int = 0
    preempted: int = 0  # jobs that gave up their slot to a tenant below its share, resumed later


class Scheduler:
    """The waiting queue, the slots and the thread that steps them."""

    def __init__(self, runtime: Runtime, settings: EdgeSettings) -> None:
        self._rt = runtime
        self._settings = settings
        self._slots = [Slot(i) for i in range(settings.slots)]
        self._waiting: FairQueue[Job] = FairQueue()
        self._by_key: collections.Counter[str] = collections.Counter()  # running jobs per key
        self._promises = Promises()  # retry-after of refused jobs, spread per key
        self._demand = Demand()  # each key's recent peak of requests in flight
        self._cond = threading.Condition()
        self._stopping = False
        self._running = 0
        self._counts: collections.Counter[str] = collections.Counter()  # EngineStats' counters
        # The recent requests' slot times, to estimate how long a waiting request will wait.
        self._durations: collections.deque[float] = collections.deque(maxlen=32)
        self._outputs: list[tuple[Slot, int]] = []  # (slot, batch index of its logits) this step
        self._outbox = Outbox()
        self._thread = threading.Thread(target=self._run, name="llama-scheduler", daemon=True)
        self._thread.start()

    # -- called from the event loops ---------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Queue ``job``, or refuse it (:class:`EdgeSaturatedError`) when its key already holds its
        share of the queue.

        The bound (``max_queue`` plus the free slots) is split evenly over the keys with work;
        with one key that is the whole bound. Keys arriving later may take the queue past the
        bound (up to twice it) while the keys over their new share drain.
        """
        with self._cond:
            free = len(self._slots) - self._running
            bound = self._settings.max_queue + free
            key = job.key
            self._demand.note(key, self._by_key[key] + self._waiting.count(key) + 1, time.monotonic())
            keys = active_keys(self._waiting, self._by_key, key)
            mine = share(bound, keys)
            if self._waiting.count(key) >= mine or len(self._waiting) >= 2 * bound:
                view = self.view(key)
                wait = self._promises.retry_after_s(key, view.room_s(mine), view.step_s(), time.monotonic())
                raise EdgeSaturatedError(
                    f"the edge queue is full: {view.waiting} of this tenant's requests wait, its fair "
                    f"share of the queue is {mine}",
                    code="edge_saturated",
                    retry_after=math.ceil(wait),
                )
            self._waiting.push(job)
            self._cond.notify()

    def view(self, key: str) -> KeyView:
        with self._cond:  # re-entrant (an RLock): submit calls it holding the lock
            return KeyView(
                running=self._running,
                ahead=self._waiting.ahead(key),
                slots=len(self._slots),
                keys=active_keys(self._waiting, self._by_key, key),
                waiting=self._waiting.count(key),
                mean_request_s=self._mean_request_s(),
            )

    def _mean_request_s(self) -> float | None:
        durations = self._durations
        return sum(durations) / len(durations) if durations else None

    def wake(self) -> None:
        """A job was cancelled: let an idle scheduler notice it now."""
        with self._cond:
            self._cond.notify()

    def stats(self) -> EngineStats:
        with self._cond:
            return EngineStats(
                self._running, len(self._waiting), len(self._slots), self._mean_request_s(), **self._counts
            )

    def stop(self, timeout: float) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)

    # -- the scheduler thread ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._wait_for_work():
                self._admit()
                ready = self._build_batch()
                self._outbox.flush()  # the last step's output, one wakeup per event loop
                if not ready:
                    continue
                try:
                    self._rt.decode()
                except GenerationError as exc:
                    log.exception("llama_decode failed")
                    self._fail_all(exc)
                    continue
                self._after_decode()
        finally:
            self._shutdown()
            self._outbox.flush()

    def _wait_for_work(self) -> bool:
        with self._cond:
            if self._stopping or self._waiting or self._running:
                return not self._stopping
        self._outbox.flush()  # about to sleep: the last step's output must not wait for new work
        with self._cond:
            while not self._stopping and not self._waiting and self._running == 0:
                self._cond.wait()
            return not self._stopping

    def _admit(self) -> None:
        """Drop cancelled work, then move waiting jobs into free slots (fairly across keys)."""
        for slot in self._slots:
            if slot.job is not None and slot.job.cancelled.is_set():
                self._end(slot, None)
        while True:
            with self._cond:
                if not self._waiting:
                    return
                free = [s for s in self._slots if s.job is None]
                nxt = self._waiting.peek(self._by_key)
                if not free:
                    if nxt is None or not self._preempt(nxt):
                        return
                    continue
                if nxt is None or keep_slots(
                    nxt, self._by_key, len(free), len(self._slots), self._demand.recent(time.monotonic())
                ):
                    return
                job = self._waiting.pop(self._by_key)
                assert job is not None  # of the key peek named
                if job.cancelled.is_set():
                    self._counts["cancelled"] += 1
                    _free_sampler(job)
                    self._outbox.put(job, DONE)
                    continue
                self._running += 1
                self._by_key[job.key] += 1
            self._place(job, free)

    def _preempt(self, key: str) -> bool:
        """Free a slot for ``key`` by parking another key's most recent job (called locked)."""
        victim = preempt_from(key, self._by_key, len(self._slots),
                              active_keys(self._waiting, self._by_key, key))
        if victim is None:
            return False
        # The job that started last has the least work to evaluate again.
        running = [(s, s.job.started_at) for s in self._slots if s.job is not None and s.job.key == victim]
        slot, _ = max(running, key=lambda p: p[1])
        job = slot.park()
        self._running -= 1
        self._by_key[victim] -= 1
        self._counts["preempted"] += 1
        self._waiting.push_front(job)
        return True

    def _place(self, job: Job, free: list[Slot]) -> None:
        tokens = job.resume if job.resume is not None else job.tokens
        # The free slot that already holds the longest prefix of this prompt; among equals the
        # one unused for longest, so the KV of recent conversations stays around.
        slot = max(free, key=lambda s: (s.common_prefix(tokens), -s.last_used))
        # At least the prompt's last token is evaluated again: its logits give the first token.
        keep = min(slot.common_prefix(tokens), len(tokens) - 1) if self._settings.prefix_reuse else 0
        if not self._rt.seq_rm(slot.seq, keep):
            keep = 0
        slot.run(job, keep, tokens)
        if job.resume is not None:
            job.resume = None
            return
        job.started_at = time.monotonic()
        params = job.request.params
        first = []  # the chain's first samplers, in llama.cpp server's order
        if params.logit_bias:
            first.append(logit_bias_sampler(self._rt.vocab.n_vocab, params.logit_bias))
        if params.penalized:
            window = len(job.answer_so_far) + job.max_tokens
            first.append(penalties_sampler(
                window, job.answer_so_far, frequency=params.frequency_penalty, presence=params.presence_penalty
            ))
        if params.repeat_penalty != 1.0:
            first.append(penalties_sampler(REPEAT_WINDOW, job.tokens, repeat=params.repeat_penalty))
        if params.temperature > 0.0 or first:
            job.sampler = sampler_chain(
                params.temperature, params.top_p, job.seed,
                self._settings.top_k if params.top_k is None else params.top_k,
                self._settings.min_p if params.min_p is None else params.min_p,
                first,
            )
        if job.grammar is not None:
            grammar = grammar_sampler(self._rt.vocab.ptr, job.grammar)  # parsed once already, at admission
            advance(grammar, job.answer_so_far)
            job.sampler = Constrained(grammar, job.sampler)
        with self._cond:
            self._counts["prompt_tokens"] += len(job.tokens)
            self._counts["prefix_reused_tokens"] += keep

    def _build_batch(self) -> bool:
        batch = self._rt.batch
        batch.clear()
        self._outputs = []
        for slot in self._slots:
            if slot.job is not None and slot.next_token is not None:
                pos = len(slot.cached)
                self._outputs.append((slot, batch.add(slot.next_token, pos, slot.seq, True)))
                slot.cached.append(slot.next_token)
                slot.next_token = None
        budget = start = min(self._settings.prefill_chunk, batch.capacity - batch.n)
        # Fair across keys, shortest prompt first within a key: a stream of one tenant's short
        # prompts cannot starve another tenant's long one.
        prefilling = sorted(
            ((s, s.job.key) for s in self._slots if s.job is not None and s.pending), key=lambda p: len(p[0].pending)
        )
        pending: collections.Counter[str] = collections.Counter()
        for slot, key in prefilling:
            pending[key] += len(slot.pending)
        shares = prefill_shares(pending, budget)  # they add up to at most the budget
        for slot, key in prefilling:
            take = slot.pending[: shares[key]]
            if not take:
                continue
            shares[key] -= len(take)
            del slot.pending[: len(take)]
            budget -= len(take)
            last = len(take) - 1
            pos = len(slot.cached)
            for i, token in enumerate(take):
                index = batch.add(token, pos + i, slot.seq, i == last and not slot.pending)
            slot.cached.extend(take)
            if not slot.pending:
                self._outputs.append((slot, index))
        with self._cond:
            self._counts["prefill_tokens"] += start - budget
        return batch.n > 0

    def _after_decode(self) -> None:
        rt = self._rt
        vocab = rt.vocab
        room_total = rt.n_ctx_slot
        live = []
        for slot, index in self._outputs:
            job = slot.job
            assert job is not None
            if job.cancelled.is_set():
                self._end(slot, None)
            else:
                live.append((slot, job, index))
        greedy = [index for _, job, index in live if job.sampler is None]
        argmax = iter(rt.argmax(greedy) if greedy else ())
        for slot, job, index in live:
            token = next(argmax) if job.sampler is None else rt.sample(job.sampler, index)
            if vocab.is_eog(token):
                self._end(slot, "stop")
                continue
            if (top := job.request.params.logprobs) is not None:
                job.logprobs.append(token_logprob(rt.logits_row(index), token, top, vocab.piece))
            text, reason = slot.feed(token, vocab.piece(token), room_total - len(slot.cached) - 1)
            if text:
                self._outbox.put(job, Chunk(text, logprobs=slot.released_logprobs()))
            if reason is not None:
                self._end(slot, reason)
        self._outputs = []

    def _end(self, slot: Slot, reason: str | None) -> None:
        """Finish (``reason``) or drop (None: cancelled) the slot's job and free the slot."""
        job = slot.job
        assert job is not None
        if reason is not None:
            self._outbox.put(job, slot.finish(reason))
        slot.release()
        _free_sampler(job)
        with self._cond:
            self._running -= 1
            self._by_key[job.key] -= 1
            if self._by_key[job.key] <= 0:
                del self._by_key[job.key]  # bounded: only keys with running work stay
            if reason is None:
                self._counts["cancelled"] += 1
            else:
                self._counts["completed"] += 1
                self._durations.append(time.monotonic() - job.started_at)
        self._outbox.put(job, DONE)

    def _fail_all(self, exc: BaseException) -> None:
        """A failed decode leaves the batch's KV unknown: fail the running jobs, start clean."""
        for slot in self._slots:
            if slot.job is not None:
                self._outbox.put(slot.job, GenerationError(f"the edge model failed: {exc}"))
                self._end(slot, None)
            self._rt.seq_rm(slot.seq, 0)
            slot.cached = []

    def _shutdown(self) -> None:
        closed = GenerationError("the edge engine closed during generation")
        for slot in self._slots:
            if slot.job is not None:
                self._outbox.put(slot.job, closed)
                self._end(slot, None)
        with self._cond:
            waiting = self._waiting.clear()
        for job in waiting:
            _free_sampler(job)
            self._outbox.put(job, closed)
            self._outbox.put(job, DONE)


def _free_sampler(job: Job) -> None:
    """A job that ended, or a parked one that will not resume: free the sampler it carries."""
    if job.sampler is not None:
        free(job.sampler)
        job.sampler = None
    job.resume = None
