"""Entry point of a rank > 0 (`python -m cloud.member.worker`, started by rank 0)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from models import EdgerouteError

from ..config import MemberServerSettings
from .ranks import SETTINGS_ENV, WEIGHTS_ENV, exit_with_parent, init_group


def main() -> None:
    settings = MemberServerSettings.model_validate_json(os.environ[SETTINGS_ENV])
    rank = int(os.environ["RANK"])
    # Ctrl-C reaches the whole process group; rank 0 decides when the ranks stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        level=settings.log_level.upper(), format=f"%(asctime)s rank{rank} %(levelname)s %(message)s"
    )
    if settings.parent_pid is not None:
        exit_with_parent(settings.parent_pid)

    import torch
    import torch.distributed as dist

    from .decode import load_model, pick_device
    from .group import Lockstep, follow
    from .shards import gather_shards

    torch.set_num_threads(settings.threads or max(1, (os.cpu_count() or 1) // settings.tensor_parallel))
    device = pick_device(settings.device)
    init_group(rank, settings.tensor_parallel, device.type, settings.collective_timeout_s)
    model, _ = load_model(Path(os.environ[WEIGHTS_ENV]), device, tensor_parallel=True, dtype=settings.dtype)
    group = Lockstep(settings.tensor_parallel, device)
    gather_shards(model, group)  # rank 0 publishes every rank's shard size
    follow(model, group)
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except EdgerouteError as exc:  # rank 0 notices the exit and reports the member down
        logging.getLogger("cloud.member.worker").error("%s", exc.message)
        sys.exit(1)
