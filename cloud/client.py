"""One pool member as an :class:`models.Engine`: streaming over aiohttp, read by httpx-sse
(``transport.py``), or one whole answer when the client asked for one, with its own circuit
breaker, recent latencies, and load (this node's requests plus what the member publishes).

The first token is the line between the two failure kinds: before it, a failure is a
:class:`MemberError` (the pool may retry elsewhere); after it, :class:`StreamBrokenError` carries
the text already delivered so the caller can continue from it. A whole answer has no "after": it
arrives complete or fails as a :class:`MemberError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import httpx
from httpx_sse import SSEError

from models import Chunk, GenerationRequest, Usage
from models.errors import ErrorEventError, WireFormatError
from models.openai.client import error_message, parse_event, parse_whole, request_body

from .breaker import CircuitBreaker, Transition
from .config import MemberSettings, PoolSettings
from .errors import (
    CloudRequestError,
    MemberConnectError,
    MemberError,
    MemberHTTPError,
    MemberProtocolError,
    MemberTimeoutError,
    StreamBrokenError,
    TruncatedStreamError,
)
from .events import EventKind, MemberStatus, PoolEvent
from .health import Probe, Scrape, probe
from .stats import Window
from .transport import MemberHTTP, events as sse_events, read_to_end

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Attempt:
    """What one request to a member has come to so far (see :meth:`Member._attempt`)."""

    started: float  # perf_counter() when it was sent
    parts: list[str] = field(default_factory=list)  # the text received
    first_at: float | None = None  # perf_counter() at its first token
    verdict: bool = False  # it answered, or failed
    counted: bool = True  # still in the member's outstanding count

# The request's own fault: another member would refuse it too.
_REQUEST_FAULT = frozenset({400, 413, 422})


class Member:
    """An OpenAI-compatible member (vLLM, this project's member server, llama.cpp's server...)."""

    def __init__(
        self,
        settings: MemberSettings,
        pool: PoolSettings,
        emit: Callable[[PoolEvent], None] | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self._pool = pool
        self._emit_cb = emit
        headers = {"authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._http = MemberHTTP(
            settings.base_url,
            headers,
            max_connections=pool.max_connections,
            connect_timeout_s=pool.connect_timeout_s,
        )
        self.breaker = CircuitBreaker(pool.failure_threshold, pool.cooldown_s, pool.max_cooldown_s)
        self.outstanding = 0
        self.health_ok: bool | None = None
        self.last_error: str | None = None
        self.scrape: Scrape | None = None
        self.latency = Window(pool.stats_window)
        self.ttft = Window(pool.stats_window)

    # -- load ------------------------------------------------------------------------------

    def depth(self) -> int:
        """Requests in flight or queued on the member: this node's plus everybody else's (per its
        last fresh `/metrics` scrape)."""
        s = self._fresh_scrape()
        return self.outstanding + (0 if s is None else max(0, s.running + s.waiting - s.ours))

    def kv_usage(self) -> float:
        """The share of the member's KV cache in use per its last fresh scrape (0 when unknown):
        between members equally deep, the one with more room takes longer prompts without
        preempting what it runs."""
        s = self._fresh_scrape()
        return 0.0 if s is None or s.kv_usage is None else s.kv_usage

    @property
    def healthy(self) -> bool:
        return self.breaker.state != "open" and self.health_ok is not False

    def _fresh_scrape(self) -> Scrape | None:
        s = self.scrape
        if s is None or time.monotonic() - s.at > max(3 * self._pool.health_interval_s, 1.0):
            return None
        return s

    def status(self) -> MemberStatus:
        s = self._fresh_scrape()
        return MemberStatus(
            name=self.name,
            base_url=self.settings.base_url,
            healthy=self.healthy,
            circuit=self.breaker.state,
            outstanding=self.outstanding,
            running=s.running if s is not None else min(self.outstanding, 1),
            waiting=s.waiting if s is not None else max(self.outstanding - 1, 0),
            latency_ms_p50=self.latency.p50(),
            ttft_ms_p50=self.ttft.p50(),
            failures=self.breaker.failures,
            last_error=self.last_error,
            kv_cache_usage=s.kv_usage if s is not None else None,
        )

    # -- outcomes --------------------------------------------------------------------------

    def _emit(self, kind: EventKind, error: str | None = None) -> None:
        if self._emit_cb is not None:
            self._emit_cb(PoolEvent(kind, self.name, error))

    def _transition(self, transition: Transition | None, reason: str | None = None) -> None:
        if transition is not None:
            if transition == "ejected":
                log.warning("cloud member %s ejected: %s", self.name, reason)
            elif transition == "readmitted":
                log.warning("cloud member %s readmitted", self.name)
            self._emit(transition, reason)

    def acquire(self) -> bool:
        """Take a request slot from the breaker (a half-open member admits one probe)."""
        allowed, transition = self.breaker.acquire()
        self._transition(transition)
        return allowed

    async def check(self) -> Probe:
        """Run an active health check and fold it into the member's state."""
        timeout_s = self._pool.health_timeout_s
        result = await probe(self._http, self.settings.root_url, self.settings.model, timeout_s, self.outstanding)
        if result.scrape is not None:
            self.scrape = result.scrape
        if result.ok is None:
            return result
        self.health_ok = result.ok
        if result.ok:
            self._transition(self.breaker.health_passed())
        else:
            self.last_error = result.error
            self._transition(self.breaker.health_failed(), result.error)
        return result

    # -- requests --------------------------------------------------------------------------

    def stream(self, request: GenerationRequest, *, whole: bool = False) -> AsyncIterator[Chunk]:
        """Yield the member's chunks unchanged (one per text delta), then a final one with
        ``finish_reason`` and ``usage``; errors as described in the module docstring.

        ``whole``: ask the member for its whole answer in one body (the client wants no stream,
        and a member's streaming path costs it more than one body); it comes back as one chunk
        that carries the text, ``finish_reason`` and ``usage``.
        """
        return self._whole(request) if whole else self._stream(request)

    @contextlib.contextmanager
    def _attempt(self, *, whole: bool) -> Iterator[_Attempt]:
        """One request to the member, counted in its load while it runs, and its verdict: a
        refusal of the request itself keeps the member alive, a failure (as :meth:`_translate`
        says it) counts against it, and a consumer that left gives no verdict."""
        state = _Attempt(time.perf_counter())
        self.outstanding += 1
        try:
            yield state
        except CloudRequestError:
            state.verdict = True
            self._transition(self.breaker.success())  # the member answered: it is alive
            self._emit("rejected")
            raise
        except (httpx.HTTPError, SSEError, TimeoutError, TruncatedStreamError, WireFormatError, MemberError) as exc:
            state.verdict = True
            error = self._translate(exc, state.parts, state.first_at is not None, whole=whole)
            self.last_error = error.message
            transition = self.breaker.failure()
            kind: EventKind = "stream_broken" if isinstance(error, StreamBrokenError) else "failure"
            self._emit(kind, error.message)
            self._transition(transition, error.message)
            if error is exc:
                raise
            raise error from exc
        finally:
            if state.counted:
                self.outstanding -= 1
            if not state.verdict:  # the consumer left (cancelled, hedged, client gone): no verdict on the member
                self.breaker.release()

    async def _stream(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        path, body = request_body(request, self.settings.model)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._pool.first_token_timeout_s
        with self._attempt(whole=False) as state:
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout_at(deadline):  # connect, send, and wait for the headers
                    response = await stack.enter_async_context(
                        # The node's request id travels on, so a member's logs can be joined with ours.
                        self._http.stream("POST", path, json=body, headers={
                            "accept": "text/event-stream", "cache-control": "no-store",
                            "x-request-id": request.request_id,
                        })
                    )
                    await self._check_status(response)
                events = sse_events(response)
                finish: str | None = None
                stop_word: str | None = None
                usage: Usage | None = None
                rest = True  # what follows the answer ([DONE], the body's end) is still to read
                while True:
                    limit = deadline if state.first_at is None else loop.time() + self._pool.stall_timeout_s
                    async with asyncio.timeout_at(limit):
                        event = await anext(events, None)
                    if event is None:
                        if finish is None:
                            raise TruncatedStreamError("the stream ended without a finish_reason")
                        rest = False
                        break
                    if event.data == "[DONE]":
                        if finish is None:
                            raise TruncatedStreamError("the stream ended ([DONE]) without a finish_reason")
                        break
                    if not event.data:
                        continue  # comments and pings
                    delta = parse_event(event.data)
                    finish = delta.finish_reason or finish
                    # Usage with or after the finish is the answer's (some servers send a running one).
                    answered = delta.usage is not None and finish is not None
                    usage = delta.usage or usage
                    stop_word = delta.stop_word or stop_word
                    if delta.text:
                        if state.first_at is None:
                            self._first_token(state)
                        state.parts.append(delta.text)
                        yield Chunk(delta.text, logprobs=delta.logprobs)
                    if answered:
                        break  # [DONE] and the body's end are read after the answer goes out
                if state.first_at is None:
                    self._first_token(state)
                state.verdict = True
                # Done on the member: stop counting it now, not when the consumer lets go of the generator.
                self.outstanding -= 1
                state.counted = False
                self._succeeded(state.started)
                try:
                    final = usage or Usage(0, len(state.parts))
                    yield Chunk("", finish_reason=finish, usage=final, stop_word=stop_word)
                finally:
                    # Read when the consumer closes the stream: a streamed answer's end is out by then.
                    if rest:
                        await read_to_end(events, loop.time() + self._pool.stall_timeout_s)

    async def _whole(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        path, body = request_body(request, self.settings.model, stream=False)
        with self._attempt(whole=True) as state:
            # One deadline for the whole answer: nothing reaches the client before it is complete.
            async with asyncio.timeout(self._pool.whole_timeout_s):
                response = await self._http.request("POST", path, json=body, headers={"x-request-id": request.request_id})
            await self._check_status(response)
            answer = parse_whole(response.content)
            if answer.finish_reason is None:
                raise TruncatedStreamError("the answer has no finish_reason")
            state.verdict = True
        # A whole answer has no time to first token: it feeds the latency window, not the TTFT one.
        self._emit("started")
        self._succeeded(state.started)
        # Members without usage count one token a delta (as streamed); a whole answer is one delta.
        usage = answer.usage or Usage(0, 1 if answer.text else 0)
        yield Chunk(answer.text, finish_reason=answer.finish_reason, usage=usage, logprobs=answer.logprobs,
                    stop_word=answer.stop_word)

    def _first_token(self, state: _Attempt) -> None:
        state.first_at = time.perf_counter()
        self.ttft.add((state.first_at - state.started) * 1000)
        self._emit("started")

    def _succeeded(self, started: float) -> None:
        self.latency.add((time.perf_counter() - started) * 1000)
        transition = self.breaker.success()
        self._emit("success")
        self._transition(transition)

    async def _check_status(self, response: httpx.Response) -> None:
        if response.status_code == 200:
            return
        body = await response.aread()
        message, param, code = error_message(body)
        text = f"member {self.name} answered {response.status_code}: {message}"
        if response.status_code in _REQUEST_FAULT:
            raise CloudRequestError(message, param=param, code=code)
        raise MemberHTTPError(text, member=self.name, status=response.status_code, code=code)

    def _translate(
        self, exc: Exception, parts: list[str], after_first: bool, *, whole: bool = False
    ) -> MemberError | StreamBrokenError:
        if isinstance(exc, MemberError):
            reason = exc.message
        elif isinstance(exc, TimeoutError) and whole:
            reason = f"member {self.name} gave no whole answer within {self._pool.whole_timeout_s:g}s"
        elif isinstance(exc, TimeoutError):
            phase = "after a chunk" if after_first else "before the first token"
            limit = self._pool.stall_timeout_s if after_first else self._pool.first_token_timeout_s
            reason = f"member {self.name} was silent for {limit:g}s {phase}"
        elif isinstance(exc, SSEError):  # an httpx.TransportError subclass, but the answer's fault
            reason = f"member {self.name} did not answer with an event stream: {exc}"
        elif isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            # Over aiohttp a refused connection arrives as ConnectTimeout too: the class name would mislead.
            reason = f"member {self.name} is unreachable: {exc}"
        elif isinstance(exc, httpx.HTTPError):
            detail = f": {exc}" if str(exc) else ""
            reason = f"member {self.name}: connection lost ({type(exc).__name__}{detail})"
        elif isinstance(exc, ErrorEventError):
            reason = f"member {self.name} sent an error event: {exc}"
        else:
            reason = f"member {self.name} sent a malformed {'answer' if whole else 'stream'}: {exc}"
        if after_first:
            return StreamBrokenError(reason, partial="".join(parts), member=self.name)
        if isinstance(exc, MemberError):
            return exc
        if isinstance(exc, TimeoutError):
            return MemberTimeoutError(reason, member=self.name, code="member_timeout")
        if isinstance(exc, httpx.TransportError) and not isinstance(exc, SSEError):
            return MemberConnectError(reason, member=self.name, code="member_unreachable")
        return MemberProtocolError(reason, member=self.name, code="member_protocol")

    async def aclose(self) -> None:
        await self._http.aclose()
