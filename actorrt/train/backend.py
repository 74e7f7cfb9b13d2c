"""What a framework does in each worker around the training function.

A ``Backend`` travels to every worker with the training function (it must pickle). The
plain ``DataParallelTrainer`` uses the no-op base; ``TorchTrainer`` uses one that starts and
ends ``torch.distributed``'s process group.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerSetup:
    """What a backend learns about its worker before the training function runs.

    Attributes:
        world_rank, local_rank, world_size, local_world_size, node_rank: the worker's place.
        master_addr, master_port: where rank 0 listens for the process group's rendezvous.
        device_index: with GPUs, this worker's device among those its process sees (its
            own grant's position in the node's union); ``None`` without GPUs.
        device_indices: every device of its own grant, by that position (a worker may
            hold more than one GPU); empty without GPUs.
    """

    world_rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    device_index: int | None
    device_indices: tuple[int, ...] = ()


class Backend:
    """Hooks run in each worker, on the training thread, around the training function.

    ``on_start`` runs after the rank variables are set and before the function; an error
    there fails the worker (and so the attempt). ``on_shutdown`` runs afterwards, also when
    the function raised; an error there is logged in the worker.
    """

    def on_start(self, setup: WorkerSetup) -> None:
        """Prepare the worker (e.g. join a process group). Default: nothing."""

    def on_shutdown(self) -> None:
        """Undo ``on_start``. Default: nothing."""

    def needs_fresh_process(self) -> bool:
        """Whether the worker's process must not be reused after this run (e.g. CUDA
        started with another run's device list). Default: no."""
        return False
