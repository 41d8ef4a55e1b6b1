"""A real node (real edge model, real HTTP) with the dashboard mounted, for the browser tests.

Until the lead wires telemetry into ``Node.run`` and the dashboard into ``create_app``, this
test-local factory does both from the outside: it mounts ``dashboard_router`` and
``metrics_handler`` on ``create_app``'s app, gives the node a ``Telemetry``, and wraps
``node.run`` so each request records one ``DecisionEvent`` when its stream ends. Once the real
wiring is on the branch, it only adds the optional fake pool and cache.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from litestar import Litestar

from dashboard import dashboard_router
from models import Chunk, GenerationRequest, Usage
from router import Node, RequestContext, Settings, create_app
from router.telemetry import Telemetry, Trace, metrics_handler


def _prompt_text(request: GenerationRequest) -> str:
    if request.messages:
        return str(request.messages[-1].get("content", ""))
    return request.prompt or ""


def _wrap_run(node: Node, telemetry: Telemetry) -> None:
    original = node.run

    async def run(request: GenerationRequest, ctx: RequestContext) -> Any:
        trace = Trace(
            request_id=f"req-{uuid.uuid4().hex[:16]}",
            tenant=ctx.tenant,
            model=request.model,
            prompt=_prompt_text(request),
            private=ctx.private,
        )
        try:
            routed = await original(request, ctx)
        except Exception as exc:
            telemetry.record(
                trace.event(
                    route="error",
                    reason=getattr(exc, "code", None) or "error",
                    status="error",
                    error=str(exc),
                )
            )
            raise
        trace.first_token()

        async def rest() -> AsyncIterator[Chunk]:
            usage = routed.first.usage or Usage(0, 0)
            status, error = "ok", None
            try:
                async for chunk in routed.rest:
                    usage = chunk.usage or usage
                    yield chunk
            except Exception as exc:
                status, error = "error", str(exc)
                raise
            finally:
                telemetry.record(
                    trace.event(
                        route=routed.route,
                        reason=routed.reason,
                        status=status,
                        error=error,
                        prompt_tokens=usage.prompt_tokens,
                        completion_tokens=usage.completion_tokens,
                    )
                )

        return replace(routed, rest=rest())

    node.run = run  # type: ignore[method-assign]


def create_node_app(settings: Settings, *, pool: Any = None, cache: Any = None) -> Litestar:
    app = create_app(settings)
    paths = {getattr(r, "path", None) for r in app.routes}
    if "/metrics" not in paths:
        app.register(metrics_handler)
    if settings.telemetry.dashboard.path not in paths:
        app.register(dashboard_router(settings.telemetry.dashboard.path))
    own: list[Telemetry] = []

    async def attach(app: Litestar) -> None:
        node = app.state.node
        if getattr(node, "telemetry", None) is None:
            telemetry = Telemetry(settings.telemetry, settings.data_dir)
            own.append(telemetry)
            node.telemetry = telemetry
            _wrap_run(node, telemetry)
        if getattr(node, "pool", None) is None:
            node.pool = pool
        if getattr(node, "cache", None) is None:
            node.cache = cache

    async def detach(_: Litestar) -> None:
        for telemetry in own:
            await telemetry.aclose()

    app.on_startup.append(attach)
    app.on_shutdown.append(detach)
    return app
