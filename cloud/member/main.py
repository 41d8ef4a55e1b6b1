"""`edgeroute cloud serve`: load the model on every rank, then serve HTTP from rank 0."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from models import EdgerouteError

from ..config import MemberServerSettings
from .ranks import Ranks, exit_with_parent, init_group
from .vllm import exec_vllm, find_vllm
from .weights import ensure_weights

log = logging.getLogger(__name__)


def serve(settings: MemberServerSettings, models_dir: Path) -> None:
    """Run a member until it is stopped (SIGINT/SIGTERM) or one of its ranks dies."""
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s rank0 %(levelname)s %(message)s"
    )
    if settings.parent_pid is not None:
        exit_with_parent(settings.parent_pid)
    if settings.engine == "vllm":
        find_vllm()  # fail before the (long) weight conversion
        exec_vllm(settings, ensure_weights(settings.model, models_dir))
        return

    import torch
    import uvicorn

    from .app import create_member_app
    from .decode import load_model, pick_device
    from .engine import TorchEngine
    from .group import Lockstep
    from .metrics import MemberMetrics
    from .shards import gather_shards

    world = settings.tensor_parallel
    weights = ensure_weights(settings.model, models_dir)
    torch.set_num_threads(settings.threads or max(1, (os.cpu_count() or 1) // world))
    device = pick_device(settings.device)
    ranks: Ranks | None = None
    group = Lockstep(world, device)
    try:
        if world > 1:
            ranks = Ranks(settings, weights)
            ranks.spawn()
            init_group(0, world, device.type, settings.collective_timeout_s)
        model, tokenizer = load_model(weights, device, tensor_parallel=world > 1, dtype=settings.dtype)
        shards = gather_shards(model, group)
    except EdgerouteError:
        if ranks is not None:  # a failed startup must not leave ranks waiting on a rendezvous
            ranks.quiesce()
            ranks.kill()
        raise
    metrics = MemberMetrics(settings.name)
    engine = TorchEngine(
        model,
        tokenizer,
        group,
        settings,
        metrics,
        on_fatal=ranks.fatal if ranks is not None else _no_group,
    )
    app = create_member_app(engine, metrics, settings, shards)
    log.warning(
        "member %s (%d rank%s) on http://%s:%d; %s numel per rank %s of %d",
        settings.name,
        world,
        "s" * (world > 1),
        settings.host,
        settings.port,
        shards.param,
        list(shards.local_numel),
        shards.full_numel,
    )
    try:
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            timeout_graceful_shutdown=5,
        )
    finally:
        if ranks is not None:
            ranks.quiesce()
        engine.close()
        if ranks is not None:
            ranks.stop()
            import torch.distributed as dist

            dist.destroy_process_group()


def _no_group(reason: str) -> None:  # one rank: failures are per request, never fatal
    log.error("unexpected fatal report without a process group: %s", reason)
