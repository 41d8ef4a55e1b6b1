"""The pool: load-aware choice among members, retries before the first token, optional hedging,
active health checks, and one event per outcome for telemetry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import statistics
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from typing import NoReturn

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from models import Chunk, GenerationRequest

from .client import Member
from .config import MemberSettings, PoolSettings
from .errors import MemberError, PoolUnavailableError
from .events import MemberStatus, PoolEvent
from .local import LocalMember

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Started:
    """A stream whose first chunk is made, so nothing can fail before a byte is sent: each
    stream's first chunk is waited for once, where it starts (the pool's members here, the edge
    and cache replays in :func:`router.fallback.prime`), and the router reads the same object on.

    ``rest`` is the engine's own stream, read straight on (no layer in between); closing it stops
    the engine. From the pool, ``member`` is the member that answered and ``failed`` lists, in
    order, those that failed before their first token (retries on one member are not listed
    twice). Iterating it yields ``first`` and then ``rest`` (for a caller that wants one stream).
    """

    first: Chunk
    rest: AsyncIterator[Chunk]
    member: str | None = None
    failed: list[str] = field(default_factory=list)

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        try:
            yield self.first
            async for chunk in self.rest:
                yield chunk
        finally:
            await self.rest.aclose()  # type: ignore[attr-defined]


class CloudPool:
    """The cloud pool behind the :class:`models.Engine` interface (name ``"cloud"``).

    ``open()`` and ``stream()`` raise :class:`PoolUnavailableError` when no member could produce a
    first token, :class:`CloudRequestError` when a member refused the request itself, and
    :class:`StreamBrokenError` (with ``partial``) when a started stream broke.
    """

    name = "cloud"

    def __init__(
        self,
        settings: PoolSettings,
        *,
        members: list[MemberSettings] | None = None,
        on_event: Callable[[PoolEvent], None] | None = None,
    ) -> None:
        self.settings = settings
        self._on_event = on_event
        chosen = settings.members if members is None else members
        self.members = [Member(m, settings, self._emit) for m in chosen]
        self._rr = 0
        self._health_task: asyncio.Task[None] | None = None
        self.local_member: LocalMember | None = None  # set by open_pool when it started one

    def add_member(self, settings: MemberSettings) -> Member:
        """Add a member at run time (the local member once it is ready); the health loop picks it up."""
        member = Member(settings, self.settings, self._emit)
        self.members.append(member)
        return member

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Run a first round of health checks, then keep checking every ``health_interval_s``."""
        await self.check_health()
        if self.settings.health_interval_s > 0 and self._health_task is None:
            self._health_task = asyncio.create_task(self._health_loop(), name="cloud-health")

    async def check_health(self) -> None:
        """Probe every member once (concurrently)."""
        await asyncio.gather(*(m.check() for m in self.members))

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.health_interval_s)
            try:
                await self.check_health()
            except Exception:  # noqa: BLE001 - the loop must survive any single round
                log.exception("cloud health check round failed")

    async def aclose(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            await asyncio.gather(self._health_task, return_exceptions=True)
            self._health_task = None
        await asyncio.gather(*(m.aclose() for m in self.members))

    async def __aenter__(self) -> CloudPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- what the router reads -------------------------------------------------------------

    def status(self) -> list[MemberStatus]:
        return [m.status() for m in self.members]

    def ttft_ms_p50(self) -> float | None:
        """The median of the healthy members' own p50 TTFTs (None before any first token)."""
        p50s = [p for m in self.members if m.healthy and (p := m.ttft.p50()) is not None]
        return statistics.median(p50s) if p50s else None

    # -- requests --------------------------------------------------------------------------

    async def open(self, request: GenerationRequest, *, avoid: Collection[str] = (), whole: bool = False) -> Started:
        """The first member that answers, started; ``avoid`` names members to use only if no
        other can serve (e.g. the one whose stream just broke, when continuing from its partial).

        ``whole``: ask members for their whole answer in one body (for a client that wants no
        stream); it comes as one chunk, and the same failover applies before it, under
        ``whole_timeout_s`` instead of the first-token timeout. With hedging on, members stream
        anyway: a hedge races first tokens, and a whole answer has none to race.
        """
        tried = list(avoid)
        failed: list[str] = []  # the members that failed before a first token
        failures: list[str] = []  # what went wrong, for the message when no member is left
        whole = whole and not self.settings.hedging
        try:  # the first attempt outside tenacity: its loop cost ~30 us a request, a retry is rare
            return await self._attempt(request, tried, failures, failed, whole)
        except MemberError as exc:
            if not exc.retryable or self.settings.retries == 0:
                self._unavailable(1, exc)
            first: MemberError = exc
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.retries + 1),
            wait=wait_exponential_jitter(
                initial=self.settings.backoff_initial_s,
                max=self.settings.backoff_max_s,
                jitter=self.settings.backoff_initial_s,
            ),
            retry=retry_if_exception(lambda e: isinstance(e, MemberError) and e.retryable),
            before_sleep=lambda state: self._retrying(state, failures),
            reraise=True,
        )
        attempts = 0
        try:
            async for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    if attempts == 1:
                        raise first  # tenacity sees the first attempt's failure: backoff, then the next
                    opened = await self._attempt(request, tried, failures, failed, whole)
            return opened
        except MemberError as exc:
            self._unavailable(attempts, exc)

    async def stream(
        self, request: GenerationRequest, *, avoid: Collection[str] = (), whole: bool = False
    ) -> AsyncIterator[Chunk]:
        """:meth:`open`'s answer as one stream (the :class:`models.Engine` interface)."""
        started = await self.open(request, avoid=avoid, whole=whole)
        async with contextlib.aclosing(aiter(started)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _choose(self, tried: list[str]) -> Member | None:
        """The member to try next: a half-open member's probe first, then the least loaded
        (depth / weight, where depth counts other clients' requests from vLLM's gauges), then the
        one with the emptier KV cache, then the one with fewer recent failures; untried members
        before tried ones; ties rotate."""
        best: list[Member] = []
        best_key: tuple[bool, int, float, float, int] | None = None
        for m in self.members:
            if not m.breaker.available():
                continue
            state, ok = m.breaker.state, m.health_ok
            if state == "half-open" and ok is not False:
                tier = 0
            elif state == "closed":
                tier = 1 if ok is not False else 3
            elif ok is not False:  # open and cooled, health unknown or good: probe with a request
                tier = 2
            else:
                continue
            key = (m.name in tried, tier, m.depth() / m.settings.weight, m.kv_usage(), m.breaker.failures)
            if best_key is None or key < best_key:
                best, best_key = [m], key
            elif key == best_key:
                best.append(m)
        if not best:
            return None
        member = best[self._rr % len(best)]
        self._rr += 1
        return member if member.acquire() else None

    def _unavailable(self, attempts: int, exc: MemberError) -> NoReturn:
        message = f"no cloud member could serve the request ({attempts} attempt(s)); last: {exc.message}"
        self._emit(PoolEvent("unavailable", None, message))
        raise PoolUnavailableError(message) from exc

    async def _attempt(
        self,
        request: GenerationRequest,
        tried: list[str],
        failures: list[str],
        failed: list[str],
        whole: bool,
    ) -> Started:
        member = self._choose(tried)
        if member is None:
            states = (
                ", ".join(f"{m.name}: {m.breaker.state}" for m in self.members) or "no members configured"
            )
            message = f"no cloud member is available ({states})"
            if failures:
                message += f"; last failure: {failures[-1]}"
            self._emit(PoolEvent("unavailable", None, message))
            raise PoolUnavailableError(message)
        tried.append(member.name)
        if not self.settings.hedging:
            return await _first(member, request, failed, whole)
        return await self._hedged(member, request, tried, failed, whole)

    async def _hedged(
        self,
        member: Member,
        request: GenerationRequest,
        tried: list[str],
        failed: list[str],
        whole: bool,
    ) -> Started:
        """Race a second member against a first one slow to its first token; the loser is cancelled."""
        tasks = [asyncio.create_task(_first(member, request, failed, whole))]
        try:
            done, _ = await asyncio.wait(tasks, timeout=self.settings.hedge_after_s)
            if not done:
                other = self._choose(tried)
                if other is not None and other.name not in tried:
                    tried.append(other.name)
                    self._emit(PoolEvent("hedge", other.name))
                    tasks.append(asyncio.create_task(_first(other, request, failed, whole)))
                elif other is not None:
                    other.breaker.release()
            pending: set[asyncio.Task[Started]] = set(tasks)
            error: BaseException | None = None
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                winners = [t for t in done if t.exception() is None]
                for task in done:
                    error = task.exception() or error
                if winners:
                    for extra in winners[1:]:
                        await extra.result().rest.aclose()  # type: ignore[attr-defined]
                    return winners[0].result()
            assert error is not None
            raise error
        finally:
            losers = [t for t in tasks if not t.done()]
            for task in losers:
                task.cancel()
            await asyncio.gather(*losers, return_exceptions=True)

    def _retrying(self, state: RetryCallState, failures: list[str]) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        message = getattr(exc, "message", str(exc))
        failures.append(message)
        self._emit(PoolEvent("retry", getattr(exc, "member", None), message))

    def _emit(self, event: PoolEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - telemetry must never break a request
            log.exception("cloud pool on_event callback failed")


async def _first(
    member: Member, request: GenerationRequest, failed: list[str], whole: bool
) -> Started:
    """Start a stream on ``member``: its first chunk, the one wait for it (retries and hedges are
    decided on it); a member that fails before it is noted in ``failed``."""
    chunks = member.stream(request, whole=whole)
    try:
        first = await anext(chunks)
    except BaseException as exc:
        if isinstance(exc, MemberError) and member.name not in failed:
            failed.append(member.name)
        await chunks.aclose()  # type: ignore[attr-defined]
        raise
    return Started(first, chunks, member.name, failed)
