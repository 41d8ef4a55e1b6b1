"""Ranks in lockstep: rank 0 broadcasts each command and each sampled token, the others follow.

Every rank must issue the same forward passes in the same order (each pass all-reduces across
ranks), so rank 0 decides everything (tokenization, sampling, stopping, cancellation) and the
other ranks only replay what it broadcasts. An idle rank 0 broadcasts a heartbeat so a waiting
rank can tell a quiet server from a dead one within the collective timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Command:
    kind: Literal["generate", "heartbeat", "shutdown"]
    ids: tuple[int, ...] = ()


class Lockstep:
    """The broadcasts of one process group; with one rank every call is local."""

    def __init__(self, world_size: int, device: Any) -> None:
        import torch

        self.world_size = world_size
        # nccl moves only GPU tensors; gloo only CPU ones.
        self._device = device if device.type == "cuda" else torch.device("cpu")
        self._step = torch.zeros(2, dtype=torch.long, device=self._device)

    def send(self, command: Command) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            dist.broadcast_object_list([command], src=0, device=self._device)

    def receive(self) -> Command:
        import torch.distributed as dist

        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0, device=self._device)
        return box[0]  # type: ignore[no-any-return]

    def gather_sizes(self, size: int) -> list[int]:
        """Every rank's ``size``, in rank order (a collective: all ranks must call it together)."""
        if self.world_size == 1:
            return [size]
        import torch
        import torch.distributed as dist

        mine = torch.tensor([size], dtype=torch.long, device=self._device)
        out = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(out, mine)
        return [int(t.item()) for t in out]

    def step(self, token: int = 0, stop: bool = False) -> tuple[int, bool]:
        """Rank 0 passes the next token (or stop); every rank returns what rank 0 sent."""
        if self.world_size == 1:
            return token, stop
        import torch.distributed as dist

        self._step[0], self._step[1] = token, int(stop)
        dist.broadcast(self._step, src=0)
        return int(self._step[0]), bool(self._step[1])


def follow(model: Any, group: Lockstep) -> None:
    """The loop of a rank > 0: replay rank 0's generations until it shuts down."""
    import torch

    from .decode import Sequence

    with torch.inference_mode():
        while True:
            command = group.receive()
            if command.kind == "shutdown":
                return
            if command.kind == "heartbeat":
                continue
            seq = Sequence(model)
            seq.prefill(list(command.ids))
            while True:
                token, stop = group.step()
                if stop:
                    break
                seq.advance(token)
