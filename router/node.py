"""The node: every resource a request may use, and the path of one request through them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from models import Chunk, Engine, GenerationRequest

from .errors import InvalidRequestError
from .settings import Settings


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked, and the per-request switches that came with the request."""

    tenant: str = "default"
    cache: bool | None = None
    private: bool = False


@dataclass
class RoutedStream:
    """A started generation: where it runs, why, and its chunks (the first already produced)."""

    route: str
    reason: str
    first: Chunk
    rest: AsyncIterator[Chunk]
    headers: dict[str, str] = field(default_factory=dict)

    async def chunks(self) -> AsyncIterator[Chunk]:
        yield self.first
        async for chunk in self.rest:
            yield chunk


class Node:
    """Holds the engines; decides where a request runs and starts it there."""

    def __init__(self, settings: Settings, edge: Engine, edge_model: str) -> None:
        self.settings = settings
        self.edge = edge
        self.edge_model = edge_model

    def model_ids(self) -> list[str]:
        """Every value a client may send as ``model``."""
        return ["auto", "edge", "cloud", self.edge_model]

    def check_model(self, model: str) -> None:
        if model not in self.model_ids():
            valid = ", ".join(self.model_ids())
            raise InvalidRequestError(
                f"the model {model!r} does not exist; valid models: {valid}",
                param="model",
                code="model_not_found",
            )

    async def run(self, request: GenerationRequest, ctx: RequestContext) -> RoutedStream:
        """Start the request and wait for its first chunk, so failures surface before any byte is sent."""
        self.check_model(request.model)
        stream = self.edge.stream(request)
        first = await anext(stream)
        return RoutedStream(route="edge", reason="edge-only", first=first, rest=stream)

    async def aclose(self) -> None:
        await self.edge.aclose()
