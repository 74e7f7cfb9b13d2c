"""What a framework does around the training function: Ray's driver-side ``Backend``
hooks, and the worker-side hooks the built-in frameworks use.

Ray's ``BackendConfig`` names its ``Backend`` (``backend_cls``); a trainer given one
(``DataParallelTrainer(backend_config=...)``) calls that backend's ``on_start``,
``on_training_start`` and ``on_shutdown`` in the calling process with the attempt's worker
group, as Ray Train does. A ``WorkerBackend`` instead travels to every worker with the
training function (it must pickle): ``TorchTrainer`` uses one that starts and ends
``torch.distributed``'s process group there.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any


class Backend:
    """Ray Train's backend: hooks the trainer calls in the calling process (the driver)
    with the attempt's worker group (``execute``, ``execute_single``, ``len``).

    ``on_start`` runs once the workers are up and ranked, before the training function;
    then ``on_training_start``; ``on_shutdown`` before the workers end, also after a
    failure (a call to a dead worker there is logged, not raised). Each attempt (a
    restart after a failure too) runs all three on its own worker group. One instance
    serves a whole ``fit()``.

    Attributes:
        share_cuda_visible_devices: Ray's switch for workers of one node seeing each
            other's GPUs; here they always do (docs/porting.md).
    """

    share_cuda_visible_devices: bool = False

    def on_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        """Set up the workers before training (e.g. ``worker_group.execute(fn)``)."""

    def on_training_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        """Called after ``on_start``, right before the training function starts."""

    def on_shutdown(self, worker_group: Any, backend_config: BackendConfig) -> None:
        """Undo ``on_start`` before the workers end."""


class BackendConfig:
    """Ray Train's backend configuration: subclass it, and name your ``Backend`` subclass
    in ``backend_cls``, to run your hooks with ``DataParallelTrainer(backend_config=...)``.
    """

    @property
    def backend_cls(self) -> type[Backend]:
        """The ``Backend`` subclass whose hooks the trainer calls (default: no-op)."""
        return Backend

    @property
    def train_func_context(self) -> type[AbstractContextManager[Any]]:
        """Ray's context manager around the training function (``nullcontext``)."""
        return nullcontext


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


class WorkerBackend:
    """Hooks run in each worker, on the training thread, around the training function
    (the built-in frameworks' setup; a user's backend is a ``Backend``).

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
