"""The node: every resource a request may use, built once in the app's lifespan."""

from __future__ import annotations

import logging
import statistics
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cloud import CloudPool, PoolEvent, open_pool
from edge import EdgeCache, Embedder, LlamaEngine
from models import Chunk, Engine, EngineLoad, GenerationRequest, resolve

from .errors import InvalidRequestError
from .fallback import StreamPlan
from .pipeline import RoutedStream, choose_targets, route
from .policy import Decision, Features, Hint, PrivacyDetector, build_policy, load_classifier
from .settings import Settings
from .telemetry import Telemetry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked, and the per-request switches that came with the request."""

    tenant: str = "default"
    cache: bool | None = None
    private: bool = False
    stream: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # answer-changing fields beyond SamplingParams


class Node:
    """Holds the engines, the cache, the pool, the policy and telemetry of one edge box."""

    def __init__(
        self,
        settings: Settings,
        edge: LlamaEngine,
        telemetry: Telemetry,
        *,
        cache: Any = None,
        embedder: Any = None,
        pool: Any = None,
    ) -> None:
        self.settings = settings
        self.edge = edge
        self.edge_model = edge.spec.alias
        self.telemetry = telemetry
        self.cache = cache
        self.embedder = embedder
        self.pool = pool
        self.policy = build_policy(settings.routing)
        self.classifier = load_classifier(settings.routing.classifier_path)
        self.privacy = PrivacyDetector.from_settings(settings.routing)
        # request id -> members that started answering / failed before their first token
        self._members: OrderedDict[str, str] = OrderedDict()
        self._failed: OrderedDict[str, list[str]] = OrderedDict()

    def on_pool_event(self, event: PoolEvent) -> None:
        """Count every pool outcome; remember which members answered or failed each request."""
        self.telemetry.pool_event(event.kind, event.member)
        rid, member = event.request_id, event.member
        if not rid or not member:
            return
        if event.kind == "started":
            _remember(self._members, rid, member)
        elif event.kind == "failure":
            failed = self._failed.get(rid) or []
            if member not in failed:
                _remember(self._failed, rid, [*failed, member])

    def fallback_path(self, plan: StreamPlan, request_id: str) -> str | None:
        """The plan's path, with a hop for each member the pool left for another before the first token.

        ``cloud->cloud`` then means one member failed and another answered; the pool's retries on
        the same member are not hops.
        """
        answering = self._members.get(request_id)
        return plan.path(sum(1 for m in self._failed.get(request_id, ()) if m != answering))

    # -- what a client may ask for ---------------------------------------------------------

    def cloud_models(self) -> list[str]:
        if self.pool is None:
            return []
        return sorted({m.model for m in self.settings.cloud.members} | set(getattr(self.pool, "models", [])))

    def model_ids(self) -> list[str]:
        """Every value a client may send as ``model``."""
        ids = ["auto", "edge", "cloud", self.edge_model]
        return ids + [m for m in self.cloud_models() if m not in ids]

    def hint_for(self, model: str) -> Hint:
        if model in ("auto", "edge", "cloud"):
            return model  # type: ignore[return-value]
        if model == self.edge_model:
            return "edge"
        if model in self.cloud_models():
            return "cloud"
        valid = ", ".join(self.model_ids())
        raise InvalidRequestError(
            f"the model {model!r} does not exist; valid models: {valid}", param="model", code="model_not_found"
        )

    # -- routing inputs --------------------------------------------------------------------

    def needs_complexity(self, hint: Hint, private: bool) -> bool:
        """Whether the complexity score can change this request's route.

        It cannot on an edge-only node, under a hint or for a private prompt (the hard rules
        decide), or with a policy that ignores it; skipping the embedding then saves its
        milliseconds from the time to first token.
        """
        return (
            self.pool is not None
            and hint == "auto"
            and not private
            and self.policy.uses_complexity
        )

    def features(self, gen: GenerationRequest, hint: Hint, private: bool, embedding: np.ndarray | None) -> Features:
        load = self.edge.load()
        prompt_tokens = self.edge.count_prompt_tokens(gen)
        wanted = gen.params.max_tokens or self.settings.edge.default_max_tokens
        healthy = [m for m in self.pool.status() if m.healthy] if self.pool is not None else []
        ttfts = [m.ttft_ms_p50 for m in healthy if getattr(m, "ttft_ms_p50", None) is not None]
        return Features(
            prompt_tokens=prompt_tokens,
            max_tokens=gen.params.max_tokens,
            complexity=None if embedding is None else self.classifier.score(embedding),
            edge_running=load.running,
            edge_waiting=load.waiting,
            edge_max_queue=self.settings.edge.max_queue,
            fits_edge_context=prompt_tokens + wanted <= self.edge.n_ctx,
            cloud_healthy=len(healthy),
            cloud_outstanding=sum(m.outstanding for m in healthy),
            cloud_ttft_ms=statistics.median(ttfts) if ttfts else None,
            hint=hint,
            private=private,
            edge_capacity=load.capacity,
            edge_wait_ms=_edge_wait_ms(self.edge),
        )

    def targets(self, decision: Decision, features: Features, plan: StreamPlan) -> list[Engine]:
        pool = None if self.pool is None else _PoolTarget(self.pool, plan.avoid)
        return choose_targets(self.edge, pool, decision, features)

    def member_of(self, request_id: str, plan: StreamPlan | None) -> str | None:
        """The pool member that answered (None for the edge and cache hits)."""
        self._failed.pop(request_id, None)
        if plan is None or not plan.attempts or plan.attempts[-1].engine != "cloud":
            self._members.pop(request_id, None)
            return None
        return self._members.pop(request_id, None)

    # -- the request path ------------------------------------------------------------------

    async def run(self, gen: GenerationRequest, ctx: RequestContext) -> RoutedStream:
        """Route and start ``gen``; failures before the first chunk raise here, before any byte."""
        return await route(self, gen, ctx, ctx.stream)



def _edge_wait_ms(edge: Engine) -> float | None:
    """The edge's own estimate of a new request's wait for a slot (None: it cannot tell)."""
    estimate = getattr(edge, "expected_wait_s", None)
    wait = estimate() if callable(estimate) else None
    return None if wait is None else wait * 1000.0


class _PoolTarget:
    """The pool as one fallback target; a continuation steers clear of members that broke."""

    name = "cloud"

    def __init__(self, pool: CloudPool, avoid: list[str]) -> None:
        self._pool = pool
        self._avoid = avoid

    def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        return self._pool.stream(request, avoid=tuple(self._avoid))

    def load(self) -> EngineLoad:
        return self._pool.load()

    async def aclose(self) -> None:
        return None


@asynccontextmanager
async def open_node(settings: Settings) -> AsyncIterator[Node]:
    """Every resource of the node, opened in order and closed in reverse, whatever happens."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    spec = resolve(settings.edge.model, settings.models_dir)
    async with AsyncExitStack() as stack:
        telemetry = Telemetry(settings.telemetry, settings.data_dir)
        stack.push_async_callback(telemetry.aclose)
        edge = LlamaEngine(spec, settings.edge)
        stack.push_async_callback(edge.aclose)
        events: list[Node] = []
        pool = await stack.enter_async_context(
            open_pool(
                settings.cloud,
                models_dir=settings.models_dir,
                on_event=lambda e: events[0].on_pool_event(e) if events else None,
                log_path=settings.data_dir / "cloud-member.log",
            )
        )
        hybrid = _has_members(settings, pool)
        cache: EdgeCache | None = None
        embedder: Embedder | None = None
        # The embedder serves the semantic cache and the complexity score; either needs it.
        if settings.cache.enabled or (hybrid and build_policy(settings.routing).uses_complexity):
            embedder = Embedder.load(settings.cache, settings.models_dir)
            stack.push_async_callback(embedder.aclose)
        if settings.cache.enabled:
            cache = EdgeCache(settings.cache.db_path(settings.data_dir), settings.cache, embedder=embedder)
            stack.push_async_callback(cache.aclose)
        node = Node(settings, edge, telemetry, cache=cache, embedder=embedder, pool=pool if hybrid else None)
        events.append(node)
        yield node


def _remember(ledger: OrderedDict[str, Any], key: str, value: Any) -> None:
    ledger[key] = value
    while len(ledger) > 4096:  # bounded: requests whose record never ran (client gone) age out
        ledger.popitem(last=False)


def _has_members(settings: Settings, pool: CloudPool) -> bool:
    return bool(pool.status()) or bool(settings.cloud.members)
