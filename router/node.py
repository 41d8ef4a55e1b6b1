"""The node: every resource a request may use, built once in the app's lifespan."""

from __future__ import annotations

import logging
import statistics
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge import LlamaEngine
from models import Engine, GenerationRequest, resolve

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
        self._stack = AsyncExitStack()

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
        )

    def targets(self, decision: Decision, features: Features) -> list[Engine]:
        return choose_targets(self.edge, self.pool, decision, features)

    def member_of(self, plan: StreamPlan | None) -> str | None:
        """The pool member that answered, when the pool says (None for the edge)."""
        if plan is None or not plan.attempts or plan.attempts[-1].engine == "edge" or self.pool is None:
            return None
        return getattr(self.pool, "last_member", lambda _rid: None)(None)

    # -- the request path ------------------------------------------------------------------

    async def run(self, gen: GenerationRequest, ctx: RequestContext) -> RoutedStream:
        """Route and start ``gen``; failures before the first chunk raise here, before any byte."""
        return await route(self, gen, ctx, ctx.stream)

    async def aclose(self) -> None:
        for closer in (self.pool, self.cache, self.embedder):
            if closer is not None:
                try:
                    await closer.aclose()
                except Exception:  # noqa: BLE001 - close the rest regardless
                    log.exception("closing %s failed", type(closer).__name__)
        await self.edge.aclose()
        await self.telemetry.aclose()


async def build_node(settings: Settings) -> Node:
    """Load the edge model and open telemetry (later: the cache and the pool)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    spec = resolve(settings.edge.model, settings.models_dir)
    telemetry = Telemetry(settings.telemetry, settings.data_dir)
    try:
        edge = LlamaEngine(spec, settings.edge)
    except BaseException:
        await telemetry.aclose()
        raise
    return Node(settings, edge, telemetry)
