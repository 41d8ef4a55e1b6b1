"""One worker thread owns a model; requests queue FIFO and their output travels back to each
request's event loop.

A model object that is not thread-safe (llama.cpp's, a torch model in a process group) is used by
one thread only. A subclass says how to serve one job (:meth:`ModelWorker.serve`) and, if it
needs to, what to do while idle, when stopping and when serving fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

P = TypeVar("P")

DONE = object()  # the end of a job's output


@dataclass
class Job(Generic[P]):
    """One request on the worker: its ``payload``, and the queue its output goes back by."""

    payload: P
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)

    def emit(self, item: Any) -> None:
        """Send a piece of output (or an exception, raised to the consumer) from the worker thread."""
        try:
            self.loop.call_soon_threadsafe(self.out.put_nowait, item)
        except RuntimeError:  # the request's loop is gone; nobody is listening
            self.cancelled.set()

    def done(self) -> None:
        self.emit(DONE)


async def drain(out: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    """A job's output queue until :data:`DONE`; an exception put on it is raised here."""
    while True:
        item = await out.get()
        if item is DONE:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


class ModelWorker(Generic[P]):
    """The worker thread and its FIFO queue; ``idle_s`` paces :meth:`idle` calls (None: never)."""

    def __init__(self, name: str, *, idle_s: float | None = None) -> None:
        self._jobs: queue.Queue[Job[P] | None] = queue.Queue()
        self._idle_s = idle_s
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    # -- the caller's side ----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def enqueue(self, payload: P) -> Job[P]:
        """Queue a job from the request's event loop."""
        job = Job(payload, asyncio.get_running_loop())
        self._jobs.put(job)
        return job

    async def output(self, job: Job[P]) -> AsyncIterator[Any]:
        """The job's output as the worker emits it; leaving early cancels the job."""
        try:
            async for item in drain(job.out):
                yield item
        finally:
            job.cancelled.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Let the queued jobs run, then stop the thread (and wait for it)."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout)

    def drain(self) -> list[Job[P]]:
        """Take every job still queued (to fail them when the worker is going down)."""
        jobs = []
        while True:
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                return jobs
            if item is not None:
                jobs.append(item)

    # -- the worker's side: what a subclass fills in --------------------------------------

    def serve(self, job: Job[P]) -> None:
        """Run one job on the worker thread, emitting its output."""
        raise NotImplementedError

    def idle(self) -> None:
        """Called every ``idle_s`` without a job."""

    def stopping(self) -> None:
        """Called on the worker thread when :meth:`stop` was asked."""

    def failed(self, job: Job[P] | None, exc: Exception) -> bool:
        """A job (or :meth:`idle`/:meth:`stopping`, job None) raised; return False to stop the thread."""
        log.exception("worker %s: job failed", self._thread.name, exc_info=exc)
        if job is not None:
            job.emit(exc)
        return True

    def context(self) -> contextlib.AbstractContextManager[Any]:
        """Entered once around the worker's whole life (e.g. ``torch.inference_mode()``)."""
        return contextlib.nullcontext()

    # -- the loop ---------------------------------------------------------------------------

    def _main(self) -> None:
        with self.context():
            for job in self._next_jobs():
                try:
                    if job is None:
                        self.stopping()
                        return
                    if job is False:
                        self.idle()
                        continue
                    self.serve(job)
                except Exception as exc:  # noqa: BLE001 - every failure must reach the requests
                    if not self.failed(job or None, exc):
                        return
                finally:
                    if isinstance(job, Job):
                        job.done()

    def _next_jobs(self) -> Iterator[Job[P] | None | bool]:
        while True:
            try:
                yield self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                yield False
