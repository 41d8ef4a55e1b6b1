"""The node's cloud side in one call: the configured members, or one local member started here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from .config import PoolSettings
from .errors import LocalMemberError
from .events import PoolEvent
from .local import LocalMember
from .pool import CloudPool

log = logging.getLogger(__name__)


@asynccontextmanager
async def open_pool(
    settings: PoolSettings,
    *,
    models_dir: Path | None = None,
    on_event: Callable[[PoolEvent], None] | None = None,
    log_path: Path | None = None,
    wait_for_local: bool = True,
    local_threads: int | None = None,
) -> AsyncIterator[CloudPool]:
    """A started pool; on exit the pool is closed and any local member stopped (SIGTERM, then SIGKILL).

    Without configured members and with ``settings.local_member`` on, a local member is started and
    supervised (restarted if it dies or hangs): ``wait_for_local`` holds startup until it serves,
    else it joins the pool when ready. Its CPU threads: ``settings.local_threads``, else
    ``local_threads`` (the caller's share of the cores), else every core. A local member that cannot
    start is logged and the pool stays empty: every request then raises :class:`PoolUnavailableError`.
    """
    pool = CloudPool(settings, on_event=on_event)
    local: LocalMember | None = None
    joining: asyncio.Task[None] | None = None
    try:
        if not settings.members and settings.local_member:
            local = LocalMember(
                model=settings.local_model,
                tensor_parallel=settings.local_tensor_parallel,
                dtype=settings.local_dtype,
                kv_cache_gib=settings.local_kv_cache_gib,
                threads=settings.local_threads or local_threads,
                port=settings.local_port,
                models_dir=models_dir,
                log_path=log_path,
                startup_timeout_s=settings.local_startup_timeout_s,
                restart=True,
            )
            pool.local_member = local
            if wait_for_local:
                await _join(pool, local)
            else:
                joining = asyncio.create_task(_join(pool, local), name="cloud-local-member")
        await pool.start()
        yield pool
    finally:
        if joining is not None:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
        await pool.aclose()
        if local is not None:
            await local.aclose()


async def _join(pool: CloudPool, local: LocalMember) -> None:
    began = asyncio.get_running_loop().time()
    try:
        member = pool.add_member(await local.start())
    except LocalMemberError as exc:
        log.error("the local cloud member did not start; the cloud pool is empty: %s", exc.message)
        return
    await member.check()
    log.warning(
        "local cloud member %s (vLLM, pid %s) serves %s in %s (ready in %.0fs)",
        local.name, local.pid, local.model, local.chosen, asyncio.get_running_loop().time() - began,
    )
