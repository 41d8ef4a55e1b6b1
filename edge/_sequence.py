"""One request on its way through the scheduler (a job), the KV slot it runs in, and the outbox
that carries a step's output back to the requests' event loops."""

from __future__ import annotations

import asyncio
import codecs
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from models import Chunk, GenerationRequest, TokenLogprob, Usage
from models.stops import StopMatcher


@dataclass(eq=False)
class Job:
    """A request admitted by the engine: its prompt tokens and the way back to its event loop."""

    tokens: list[int]
    max_tokens: int
    request: GenerationRequest
    seed: int
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[Any]
    cancelled: threading.Event = field(default_factory=threading.Event)
    grammar: str | None = None  # ``response_format`` as GBNF
    # A continuation's answer so far, when a grammar or penalties must count it as generated.
    answer_so_far: list[int] = field(default_factory=list)
    # Its run, kept with the job (not the slot) so that a preempted job resumes where it was.
    sampler: Any = None  # None for a greedy job (the scheduler takes the argmax)
    # Whole UTF-8 characters only: a character split across tokens is held until complete.
    decoder: codecs.IncrementalDecoder = field(init=False)
    stops: StopMatcher = field(init=False)
    # Log probabilities of the tokens whose text the stop matcher or decoder still holds.
    logprobs: list[TokenLogprob] = field(default_factory=list)
    n_out: int = 0
    started_at: float = 0.0
    # Set while the job waits again after giving up its slot mid-answer (preempted): the prompt
    # and the answer so far (the last one sampled but not yet evaluated included). The slot it
    # resumes in evaluates them again (recompute, as vLLM's preemption does), keeping whatever
    # prefix that slot's KV still holds.
    resume: list[int] | None = None

    def __post_init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.stops = StopMatcher(self.request.params.stop)

    @property
    def key(self) -> str:
        """The fairness key (the tenant): the scheduler shares slots and queue fairly across keys."""
        return self.request.fair_key


DONE = object()  # the end of a job's output (an exception put on it is raised to the caller)


def _deliver(items: list[tuple[Job, Any]]) -> None:
    for job, item in items:
        job.out.put_nowait(item)


class Outbox:
    """What one step produced for its jobs, sent with one wakeup per event loop.

    Waking an event loop from another thread costs more than the token it carries, so one wakeup
    per step hands every sequence's new text over at once, in the order it was put. The scheduler
    thread wakes the loops itself: a thread of its own for it took a core from llama.cpp
    mid-decode (8-stream throughput halved on two cores).
    """

    def __init__(self) -> None:
        self._items: list[tuple[Job, Any]] = []

    def put(self, job: Job, item: Any) -> None:
        self._items.append((job, item))

    def flush(self) -> None:
        """Send what was put since the last flush."""
        items, self._items = self._items, []
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, Any]]] = {}
        for entry in items:
            by_loop.setdefault(entry[0].loop, []).append(entry)
        for loop, batch in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, batch)
            except RuntimeError:
                # The requests' event loop is closed: nobody is listening any more.
                for job, _ in batch:
                    job.cancelled.set()


class Slot:
    """One llama.cpp sequence id, the tokens its KV holds, and the job it is running (if any).

    The KV survives the job: a later prompt that starts with the same tokens (a shared system
    prompt, the next turn of a conversation) keeps that prefix instead of evaluating it again.
    """

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.cached: list[int] = []  # tokens whose KV the sequence holds, in position order
        self.job: Job | None = None
        self.pending: list[int] = []  # prompt tokens still to evaluate
        self.next_token: int | None = None  # sampled, to be fed in the next step
        self.last_used = 0.0

    def common_prefix(self, tokens: list[int]) -> int:
        for i, (cached, token) in enumerate(zip(self.cached, tokens)):
            if cached != token:
                return i
        return min(len(self.cached), len(tokens))

    def park(self) -> Job:
        """Take the running job out mid-answer (see :attr:`Job.resume`); the slot is free after it."""
        job = self.job
        assert job is not None
        job.resume = self.cached + self.pending + ([self.next_token] if self.next_token is not None else [])
        self.release()
        return job

    def run(self, job: Job, keep: int, tokens: list[int]) -> None:
        """Run ``job`` from ``tokens`` (its prompt, or a parked job's :attr:`Job.resume`), keeping
        the first ``keep`` cached tokens (their KV is already right)."""
        self.job = job
        del self.cached[keep:]
        self.pending = tokens[keep:]
        self.next_token = None

    def feed(self, token: int, piece: bytes, room: int) -> tuple[str, str | None]:
        """Take one sampled token (``piece``: its bytes; ``room``: how many more tokens the slot's
        window holds): the text safe to emit and the finish reason if the job ends."""
        job = self.job
        assert job is not None
        job.n_out += 1
        text, hit = job.stops.feed(job.decoder.decode(piece))
        if hit:
            return text, "stop"
        if job.n_out >= job.max_tokens or room <= 0:
            return text, "length"
        self.next_token = token
        return text, None

    def finish(self, reason: str) -> Chunk:
        """The job's last chunk: the held-back tail, the finish reason and the usage."""
        job = self.job
        assert job is not None
        tail = "" if job.stops.hit else job.stops.flush(job.decoder.decode(b"", final=True))
        held = tuple(job.logprobs) if tail else ()  # a stop string's tokens are not the answer's
        return Chunk(tail, finish_reason=reason, usage=Usage(len(job.tokens), job.n_out), logprobs=held,
                     stop_word=job.stops.matched)

    def released_logprobs(self) -> tuple[TokenLogprob, ...]:
        """The held log probabilities, handed over with the text just released."""
        job = self.job
        assert job is not None
        held, job.logprobs = tuple(job.logprobs), []
        return held

    def release(self) -> None:
        """Detach the job; the KV of what was evaluated stays for prefix reuse."""
        self.job = None
        self.pending = []
        self.next_token = None
        self.last_used = time.monotonic()
