"""The worker group a ``Backend``'s hooks get (Ray Train's ``WorkerGroup``), and the
hooks' calls around an attempt.

The hooks are synchronous user code: they run on a thread of their own, so that
``execute`` can wait for the workers' answers, which arrive on the coordinator's event
loop. Workers are in world-rank order; a call runs on each worker's actor thread, with
``train.get_context()`` answering that worker's ranks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import actorrt

from ._gang import Gang
from .backend import Backend, BackendConfig
from .context import WorkerInfo

logger = logging.getLogger("actorrt.train")


@dataclass(frozen=True)
class WorkerMetadata:
    """Where a worker runs (Ray's ``WorkerMetadata`` fields)."""

    node_id: str
    node_ip: str
    hostname: str
    pid: int
    gpu_ids: list[str]


@dataclass(frozen=True)
class DistributedContext:
    """A worker's place in the group (Ray's ``DistributedContext``)."""

    world_rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int


@dataclass(frozen=True)
class Worker:
    """One worker of the group: ``metadata`` and ``distributed_context``."""

    metadata: WorkerMetadata
    distributed_context: DistributedContext


class PendingCall:
    """A call in flight on one worker: ``result(timeout)`` waits for it, and it can be
    awaited, or passed to ``actorrt.get`` (where Ray's ``execute_async`` gives refs for
    ``ray.get``)."""

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value (or its exception, raised)."""
        return self._future.result(timeout)

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.wrap_future(self._future).__await__()


class WorkerGroup:
    """The workers of one attempt, for a ``Backend``'s hooks.

    ``len(group)`` and ``num_workers`` are the number of workers; ``execute(fn, *args,
    **kwargs)`` runs ``fn`` on every worker and returns the results in rank order;
    ``execute_single(rank, fn, ...)`` on one; the ``_async`` forms return
    ``PendingCall``s at once. ``fn`` and its arguments must pickle.
    """

    def __init__(self, gang: Gang, loop: asyncio.AbstractEventLoop, experiment: str) -> None:
        setups = gang.setups()
        order = sorted(range(len(gang.members)), key=lambda i: setups[i][0].world_rank)
        self._loop = loop
        self._experiment = experiment
        self._refs = [gang.members[i].ref for i in order]
        self._infos: list[WorkerInfo] = []
        self.workers: list[Worker] = []
        for i in order:
            setup, member = setups[i][0], gang.members[i]
            self._infos.append(WorkerInfo(
                setup.world_rank, setup.local_rank, setup.world_size,
                setup.local_world_size, setup.node_rank,
            ))
            self.workers.append(Worker(
                WorkerMetadata(member.node, member.ip, member.node, member.pid,
                               list(member.gpus)),
                DistributedContext(setup.world_rank, setup.world_size, setup.local_rank,
                                   setup.local_world_size, setup.node_rank),
            ))

    @property
    def num_workers(self) -> int:
        """How many workers the group has."""
        return len(self._refs)

    def __len__(self) -> int:
        return len(self._refs)

    def get_workers(self) -> list[Worker]:
        """The workers, in rank order."""
        return list(self.workers)

    def execute_async(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[PendingCall]:
        """Start ``fn(*args, **kwargs)`` on every worker; one ``PendingCall`` per rank."""
        return [self.execute_single_async(r, fn, *args, **kwargs) for r in range(len(self))]

    def execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` on every worker; the results in rank order.

        Raises:
            what ``fn`` raised on a worker (the first rank's to fail), or
            ``actorrt.ActorDiedError`` for a worker that is gone.
        """
        return [call.result() for call in self.execute_async(fn, *args, **kwargs)]

    def execute_single_async(
        self, rank: int, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> PendingCall:
        """Start ``fn(*args, **kwargs)`` on worker ``rank``.

        Raises:
            TypeError: ``fn`` is not callable.
            IndexError: no worker has that rank.
            RuntimeError: called on the coordinator's event loop (from a hook it is not).
        """
        if not callable(fn):
            raise TypeError(f"execute takes a function to run on the workers, got {fn!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(self):
            raise IndexError(
                f"worker rank must be an int in [0, {len(self)}), got {rank!r}"
            )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError(
                "WorkerGroup.execute* waits for the workers and cannot be called on the "
                "trainer's event loop; call it from a Backend hook"
            )
        call = self._call(rank, fn, args, kwargs)
        return PendingCall(asyncio.run_coroutine_threadsafe(call, self._loop))

    def execute_single(self, rank: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on worker ``rank`` and return its result."""
        return self.execute_single_async(rank, fn, *args, **kwargs).result()

    async def _call(
        self, rank: int, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return await self._refs[rank].execute(
            fn, args, kwargs, self._infos[rank], self._experiment
        )

    def __repr__(self) -> str:
        return f"WorkerGroup(num_workers={len(self)})"


class BackendHooks:
    """A ``BackendConfig``'s ``Backend``, called around each attempt as Ray Train does:
    ``on_start`` and ``on_training_start`` once the workers are up, ``on_shutdown``
    before they end.

    Raises:
        TypeError: ``backend_cls`` is not a ``Backend`` subclass.
    """

    def __init__(self, config: BackendConfig) -> None:
        cls = config.backend_cls
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(
                f"{type(config).__name__}.backend_cls must be a subclass of "
                f"actorrt.train.backend.Backend, got {cls!r}"
            )
        self.config = config
        self.custom = cls is not Backend  # only then is there anything to call
        self.backend = cls() if self.custom else None
        self._warned = False

    async def start(self, group: WorkerGroup) -> None:
        """``on_start`` then ``on_training_start``; what they raise is raised."""
        if self.backend is None:
            return
        if not self.backend.share_cuda_visible_devices and not self._warned and any(
            w.metadata.gpu_ids for w in group.workers
        ):
            self._warned = True
            logger.warning(
                "%s.share_cuda_visible_devices is False, but the workers of one node see "
                "all of that node's workers' GPUs here (Ray would show each worker only its "
                "own); each worker's own device is train.torch.get_device() "
                "(docs/porting.md)", type(self.backend).__name__,
            )
        await asyncio.to_thread(self._start, self.backend, group)

    def _start(self, backend: Backend, group: WorkerGroup) -> None:
        backend.on_start(group, self.config)
        backend.on_training_start(group, self.config)

    async def shutdown(self, group: WorkerGroup) -> None:
        """``on_shutdown``; an error there is logged (after a failure the workers may be
        gone already), never raised."""
        if self.backend is None:
            return
        try:
            await asyncio.to_thread(self.backend.on_shutdown, group, self.config)
        except actorrt.ActorError as exc:
            logger.warning("%s.on_shutdown: a worker is gone: %s",
                           type(self.backend).__name__, exc)
        except Exception:
            logger.exception("%s.on_shutdown failed", type(self.backend).__name__)
