"""Fallback that never drops a stream.

Before the first token, a failed target is simply replaced by the next one. After it, the text
the client already has becomes the assistant prefix of a continuation on the next target, and the
client keeps reading one stream with one ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace

from cloud import CloudPool, CloudRequestError, Started
from edge import EdgeSaturatedError
from models import Chunk, EdgerouteError, Engine, EngineError, GenerationRequest

from .errors import EdgeBusyError, NoCapacityError
from .policy import Decision, Features


@dataclass
class Attempt:
    """One try on one engine, as telemetry and the response headers report it."""

    engine: str
    outcome: str  # "ok", "failed-before-first-token", "broken-mid-stream", "yielded"
    error: str | None = None
    member: str | None = None  # the pool member that answered (cloud attempts)
    member_hops: int = 0  # other members the pool left for this one before its first token
    cause: EngineError | None = field(default=None, repr=False)  # the failure, for the pipeline's answer


@dataclass
class StreamPlan:
    """The ordered engines a request may use, and what happened on each."""

    targets: Sequence[Engine | _PoolTarget]
    attempts: list[Attempt] = field(default_factory=list)
    # Members whose stream broke: a continuation prefers any other (read by the pool target).
    avoid: list[str] = field(default_factory=list)
    index: int = 0  # the target now answering

    def path(self) -> str | None:
        """``"cloud->edge"`` style path when more than one engine (or pool member) was tried, else None.

        Members the pool left for another one before its first token count as ``cloud`` hops
        (``cloud->cloud``: one member failed, another answered); retries on one member do not.
        """
        hops: list[str] = []
        for attempt in self.attempts:
            hops += [attempt.engine] * (1 + attempt.member_hops)
        return "->".join(hops) if len(hops) > 1 else None

    @property
    def answered_by(self) -> str | None:
        """The engine of the attempt that delivered the answer's end (None before any did)."""
        return next((a.engine for a in reversed(self.attempts) if a.outcome == "ok"), None)

    @property
    def member(self) -> str | None:
        """The pool member that answered (None when the last attempt is not on the cloud)."""
        return self.attempts[-1].member if self.attempts and self.attempts[-1].engine == "cloud" else None


async def start(plan: StreamPlan, request: GenerationRequest, start_index: int = 0) -> Started:
    """Start on the first target that produces a first chunk; raise the last error if none does.
    An :class:`~models.EngineError` moves on to the next target; any other error (the request's
    own fault) goes up at once. The pool retries and hedges its own members' first tokens.
    """
    last: BaseException | None = None
    for index in range(start_index, len(plan.targets)):
        engine = plan.targets[index]
        if any(a.engine == engine.name and a.outcome == "failed-before-first-token" for a in plan.attempts):
            continue  # it already retried internally and gave up; asking again only adds waiting
        try:
            if isinstance(engine, _PoolTarget):
                started = await engine.open(request)
            else:
                started = await prime(engine.stream(request))
        except EngineError as exc:
            plan.attempts.append(Attempt(engine.name, "failed-before-first-token", describe(exc), cause=exc))
            last = exc
            continue
        except StopAsyncIteration:
            plan.attempts.append(Attempt(engine.name, "failed-before-first-token", "empty stream"))
            continue
        hops = sum(1 for m in started.failed if m != started.member)
        plan.attempts.append(Attempt(engine.name, "ok", member=started.member, member_hops=hops))
        plan.index = index
        return started
    if last is not None:
        raise last
    raise EdgerouteError("no target produced an answer", code="no_target")


async def prime(chunks: AsyncIterator[Chunk]) -> Started:
    """A stream started: its first chunk waited for (an empty stream raises
    :class:`StopAsyncIteration`); one that fails first is closed."""
    try:
        first = await anext(chunks)
    except BaseException:
        await chunks.aclose()  # type: ignore[attr-defined]
        raise
    return Started(first, chunks)


def no_start_error(plan: StreamPlan, exc: EngineError) -> EdgerouteError:
    """What a request gets when no target gave a first chunk (``exc``: the last one's error).

    A 429 when the edge found the tenant over its fair share of its queue (whatever the cloud
    said); the request's own 400 when every engine tried refused the request itself (a prompt too
    long for the edge and for the cloud: retrying cannot help); else a 503, no capacity now.
    """
    saturated = next((a.cause for a in plan.attempts if isinstance(a.cause, EdgeSaturatedError)), None)
    if saturated is not None:
        return EdgeBusyError(f"edge saturated: {saturated.message}", retry_after=saturated.retry_after)
    failures = [a.cause for a in plan.attempts if a.outcome == "failed-before-first-token"]
    if failures and all(isinstance(c, CloudRequestError) for c in failures):
        return failures[-1]  # type: ignore[return-value]
    return NoCapacityError(
        f"neither the edge nor the cloud can take this request now ({exc})", retry_after=2, code="no_capacity"
    )


async def resume(
    plan: StreamPlan, request: GenerationRequest, exc: EngineError, sent: Sequence[str],
    outcome: str = "broken-mid-stream",
) -> Started | None:
    """After ``exc`` broke the stream mid-way (or the edge yielded it: ``outcome``), with ``sent``
    (one token a chunk) already out: the next target started on a continuation from the text so
    far, asked for what ``max_tokens`` has left (None when nothing is: the answer ends there,
    ``length``); ``exc`` again when no target is left."""
    plan.attempts[-1].outcome = outcome
    plan.attempts[-1].error = describe(exc)
    member = getattr(exc, "member", None)
    if member:
        plan.avoid.append(member)
    if plan.index + 1 >= len(plan.targets):
        raise exc
    params = request.params
    if params.max_tokens is not None:
        left = params.max_tokens - len(sent)
        if left <= 0:
            return None
        params = replace(params, max_tokens=left)
    cont = replace(request, params=params, assistant_prefix=request.assistant_prefix + "".join(sent))
    return await start(plan, cont, plan.index + 1)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def plan_for(
    edge: Engine, pool: CloudPool | None, decision: Decision, features: Features, *, whole: bool = False
) -> StreamPlan:
    """The ordered engines for a decision; a private request never gets a cloud target.

    ``whole``: the client wants no stream, so the pool asks its members for whole answers.
    """
    plan = StreamPlan([edge])
    if pool is None or features.private:
        return plan
    # After a broken stream a second pool attempt continues on another member, when there is one.
    target = _PoolTarget(pool, plan.avoid, whole)
    cloud: list[Engine | _PoolTarget] = [target, target] if features.cloud_healthy >= 2 else [target]
    if decision.target == "cloud":
        plan.targets = [*cloud, edge] if features.fits_edge_context else cloud
    else:
        plan.targets = [edge, *cloud]
    return plan


class _PoolTarget:
    """The pool as one fallback target; a continuation steers clear of members whose stream broke."""

    name = "cloud"

    def __init__(self, pool: CloudPool, avoid: list[str], whole: bool) -> None:
        self._pool = pool
        self._avoid = avoid  # the plan's: filled by the fallback as streams break
        self._whole = whole

    async def open(self, request: GenerationRequest) -> Started:
        return await self._pool.open(request, avoid=tuple(self._avoid), whole=self._whole)
