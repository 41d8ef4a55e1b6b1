"""The node: every resource a request may use, built once in the app's lifespan.

:class:`Node` is a record and nothing more; the path of one request is
:mod:`router.pipeline`, which reads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from cloud import CloudPool, PoolSettings, native_bf16, open_pool
from edge import EdgeCache, EdgeSettings, Embedder, LlamaEngine, physical_cores
from models import EMBEDDING_DEFAULT, resolve
from models.files import private_dir

from .errors import InvalidRequestError
from .limits import RateLimiter
from .responses_store import ResponseStore
from .policy import ComplexityClassifier, Policy, PrivacyDetector, SpeedModels, build_policy, load_classifier
from .settings import Settings
from .telemetry import Telemetry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Node:
    """The engines, the cache, the pool, the routing policy and telemetry of one edge box.

    ``cache`` is None when caching is off, ``embedder`` when neither the cache nor the policy
    needs one, ``pool`` on an edge-only node (no member configured or started).
    """

    settings: Settings
    edge: LlamaEngine
    telemetry: Telemetry
    policy: Policy
    classifier: ComplexityClassifier
    privacy: PrivacyDetector
    responses: ResponseStore  # the Responses API's stored responses
    cache: EdgeCache | None = None
    embedder: Embedder | None = None
    pool: CloudPool | None = None
    limiter: RateLimiter | None = None  # None: no per-tenant rate is configured
    speed: SpeedModels = field(default_factory=SpeedModels)  # each side's speed models
    edge_yields: bool = False  # the local member runs on the edge's cores and is the faster engine

    @property
    def edge_model(self) -> str:
        return self.edge.spec.alias

    def cloud_models(self) -> list[str]:
        if self.pool is None:
            return []
        return sorted({m.model for m in self.settings.cloud.members})

    def model_ids(self) -> list[str]:
        """Every value a client may send as ``model``."""
        ids = ["auto", "edge", "cloud", self.edge_model]
        return ids + [m for m in self.cloud_models() if m not in ids]

    def listed_models(self) -> list[str]:
        """What ``/v1/models`` lists: :meth:`model_ids`, and the embedding model when it is loaded."""
        return self.model_ids() + ([EMBEDDING_DEFAULT] if self.embedder is not None else [])

    def unknown_model(self, model: str) -> InvalidRequestError:
        """The error (a 404) for a model id this node does not generate with; it lists the valid
        ones (an embedding model is a 404 too, as OpenAI answers a chat request to one)."""
        valid = ", ".join(self.model_ids())
        if model == EMBEDDING_DEFAULT and self.embedder is not None:
            message = f"the model {model!r} is an embedding model: it answers /v1/embeddings only; valid models here: {valid}"
        else:
            message = f"the model {model!r} does not exist; valid models: {valid}"
        return InvalidRequestError(message, param="model", code="model_not_found")

    def embedding_model(self, model: str) -> Embedder:
        """The embedder serving ``model`` at ``/v1/embeddings`` (the node has one), or a 404."""
        if self.embedder is None:
            raise InvalidRequestError(
                "this node serves no embeddings: its embedding model is loaded for the semantic cache "
                "or the complexity policy, and both are off",
                param="model", code="model_not_found",
            )
        if model != EMBEDDING_DEFAULT:
            raise InvalidRequestError(
                f"the embedding model {model!r} does not exist; valid embedding models: {EMBEDDING_DEFAULT}",
                param="model", code="model_not_found",
            )
        return self.embedder


def local_member_threads(edge: EdgeSettings, cores: int | None = None) -> int:
    """The physical cores the edge's llama.cpp threads leave to a local member, at least one.

    Either engine's threads spin-wait for each other at every step: on a small box, both on
    every core stall each other (docs/cloud.md).
    """
    return max(1, (physical_cores() if cores is None else cores) - edge.threads())


def member_first(cloud: PoolSettings, cpuinfo: str | None = None) -> bool:
    """Whether the node's local member (none configured, no thread count set) will compute bfloat16
    on this CPU's own instructions: there it is the faster engine of the box (docs/cloud.md), so it
    runs on every core and the edge yields it the cores under load; elsewhere the two split them."""
    return (
        not cloud.members and cloud.local_member and cloud.local_threads is None
        and native_bf16(cloud.local_dtype, cpuinfo)
    )


@asynccontextmanager
async def open_node(settings: Settings) -> AsyncIterator[Node]:
    """Every resource of the node, opened in order and closed in reverse, whatever happens."""
    private_dir(settings.data_dir)
    spec = resolve(settings.edge.model, settings.models_dir)
    policy = build_policy(settings.routing)
    first = member_first(settings.cloud)
    async with AsyncExitStack() as stack:
        telemetry = Telemetry(settings.telemetry, settings.data_dir)
        stack.push_async_callback(telemetry.aclose)
        edge = LlamaEngine(spec, settings.edge)
        stack.push_async_callback(edge.aclose)
        pool = await stack.enter_async_context(
            open_pool(
                settings.cloud,
                models_dir=settings.models_dir,
                on_event=lambda event: telemetry.pool_event(event.kind, event.member),
                log_path=settings.data_dir / "cloud-member.log",
                # vLLM takes minutes to load and warm up on a CPU: the node serves from the edge
                # meanwhile, and the local member joins the pool once it answers.
                wait_for_local=False,
                local_threads=None if first else local_member_threads(settings.edge),
            )
        )
        if pool.local_member is not None:
            log.info(
                "local member: %s", "bfloat16 on this CPU's own instructions: it takes every core and the edge "
                "yields them to it under load" if first else "it shares the cores the edge's threads leave",
            )
        hybrid = bool(pool.status()) or bool(settings.cloud.members) or pool.local_member is not None
        cache: EdgeCache | None = None
        embedder: Embedder | None = None
        # The embedder serves the semantic cache and the complexity score; either needs it.
        if settings.cache.enabled or (hybrid and policy.uses_complexity):
            embedder = Embedder.load(settings.cache, settings.models_dir)
            stack.push_async_callback(embedder.aclose)
            # Its buffers at their largest now, not under the first load: the footprint the
            # operator sees at start is the steady one (docs/reliability.md).
            await asyncio.to_thread(embedder.warm)
        if settings.cache.enabled:
            cache = EdgeCache(settings.cache.db_path(settings.data_dir), settings.cache, embedder=embedder)
            stack.push_async_callback(cache.aclose)
        limiter = RateLimiter(settings.limits)
        responses = ResponseStore(settings.data_dir / settings.responses.db_file, settings.responses)
        stack.push_async_callback(responses.aclose)
        yield Node(
            settings=settings,
            edge=edge,
            telemetry=telemetry,
            policy=policy,
            classifier=load_classifier(settings.routing.complexity.classifier_path),
            privacy=PrivacyDetector.from_settings(settings.routing),
            cache=cache,
            embedder=embedder,
            pool=pool if hybrid else None,
            limiter=limiter if limiter.enabled else None,
            responses=responses,
            edge_yields=first and pool.local_member is not None,
        )
