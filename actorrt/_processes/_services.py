"""What the processes layer asks of the runtime that composes it.

The processes layer (dispatch, router, proxies, process actors, pool, worker main) never
imports ``actorrt._runtime._root``: the runtime sits above it. It reaches the runtime through the
:class:`RuntimeForProcesses` protocol, which names every service it uses (and, for the router
and the broker bridge that the runtime holds, the parts of them that other modules of
this layer use: :class:`RouterServices`, :class:`WaitReports`), and a worker process
builds its runtime through a :class:`WorkerRuntimeFactory` it is given by name (the class of
its owner's runtime; see :mod:`actorrt._processes._worker_main`). ``actorrt._runtime._root.Runtime``
satisfies both; mypy checks it where the runtime hands itself to the router.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine, Hashable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .._core._actor import ActorClass
    from .._core._ref import ActorRef
    from .._core._waits import WaitGraph
    from .._wire._codec import Codec
    from .._wire._connection import Connection
    from .._wire._dispatcher import Dispatcher
    from .._wire._refs import RefAddress
    from ._direct import PeerSide
    from ._pool import WorkerPool

T = TypeVar("T")

# (the resources of an actor's grant, its PlacementInfo or None), or None: no grant.
GrantInfo = tuple[dict[str, float], Any] | None


class RouterServices(Protocol):
    """The router (``actorrt._processes._router.Workers``), as process actors and the worker
    main use it."""

    @property
    def codec(self) -> Codec:
        """The codec of this runtime's connections (it knows refs)."""
        ...

    @property
    def dispatcher(self) -> Dispatcher:
        """The handler of this runtime's connections."""
        ...

    async def pool(self) -> WorkerPool:
        """The worker pool, its socket opened on first use."""
        ...

    def started_pool(self) -> WorkerPool:
        """The worker pool, which must have been opened."""
        ...

    def resolve(self, actor_id: str) -> Any:
        """The target of a message to ``actor_id`` here: an actor of this process, or the
        relay on the connection that reaches it; ``None`` if neither."""
        ...

    def worker_connected(self, worker_id: str, conn: Connection) -> bool:
        """A worker said hello on ``conn``; whether this runtime started it."""
        ...

    def locate(self, actor_id: str, transport: str) -> tuple[str, asyncio.Future[Any]] | None:
        """In the owner: the worker that runs process actor ``actor_id`` and the request for
        its direct endpoint; ``None``: keep calling through the owner."""
        ...

    async def peer_endpoint(self) -> dict[str, Any] | None:
        """In a worker: where the other workers connect to it directly."""
        ...

    def attach_owner(
        self, conn: Connection, address: RefAddress, own_processes: Collection[int] = ()
    ) -> None:
        """In a worker: the owning runtime is reached through ``conn``; this process's
        actors live at ``address``; ``own_processes`` are the worker's own child processes,
        which outlive the actors it hosts."""
        ...

    def attach_peers(self, side: PeerSide, worker_id: str) -> None:
        """In a worker: take and make direct connections to the other workers."""
        ...


class WaitReports(Protocol):
    """The broker bridge (``actorrt._processes._scheduler.Grants``), as dispatch uses it."""

    def blocked_on_holder(
        self, waiter: Hashable, target: Hashable, blocked: bool, serial: bool | None = None
    ) -> None:
        """An actor began or ended awaiting an ask to another."""
        ...


class WorkerRequests(Protocol):
    """What workers ask of the runtime that owns them (over their connections)."""

    async def spawn_for_worker(
        self,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        chain: list[tuple[str, str]] | None,
        bounded: bool = False,
    ) -> ActorRef[Any]:
        """In the owner: a worker's actor spawns a worker-process actor."""
        ...

    async def reserve_for_worker(
        self, group_id: str, specs: list[dict[str, float]], strategy: str, holder: str | None
    ) -> None:
        """In the owner: a worker's ``placement_group()``."""
        ...

    async def ready_for_worker(self, group_id: str, requester: str | None) -> None:
        """In the owner: wait until a worker's group is reserved."""
        ...

    async def remove_for_worker(self, group_id: str) -> None:
        """In the owner: remove a worker's group."""
        ...

    def edge_reported(self, waiter: Any, target: Any, conn: Connection, added: bool) -> None:
        """In the owner: a worker's actor began or ended awaiting an ask to ``target`` (or
        its count of such waits changed, ``added``: whether it still has one)."""
        ...


class RuntimeForProcesses(Protocol):
    """The runtime's services that the processes layer uses."""

    @property
    def owner(self) -> WorkerRequests:
        """The side that serves this runtime's worker processes (raises in a worker)."""
        ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The runtime's event loop."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the runtime has shut down."""
        ...

    @property
    def runtime_id(self) -> str:
        """This runtime's id (a prefix of its actors' ids, and of its refs' addresses)."""
        ...

    @property
    def waits(self) -> WaitGraph:
        """The wait edges of this process's actors."""
        ...

    @property
    def grants(self) -> WaitReports:
        """The bridge to the resource broker."""
        ...

    @property
    def workers(self) -> RouterServices:
        """The cross-process side of the runtime (the router)."""
        ...

    def lookup(self, actor_id: str) -> Any:
        """The cell or process-actor proxy of a live actor of this runtime, or ``None``."""
        ...

    def get_actor(self, name: str) -> ActorRef[Any]:
        """The named actor's ref; ``ActorNotFoundError`` if none."""
        ...

    def forget(self, cell: Any) -> None:
        """An actor ended: drop it and give back what it held."""
        ...

    def children_ending(self, parent: Any) -> None:
        """``parent``'s children are being ended: no new one may start."""
        ...

    def children_may_start(self, parent: Any) -> None:
        """``parent`` restarted: it may spawn children again."""
        ...

    async def call_on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runtime's loop from another thread's loop."""
        ...

    async def host_actor(
        self,
        actor_id: str,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        restart_count: int,
        grant_info: GrantInfo,
    ) -> None:
        """In a worker: construct the actor the owner placed here."""
        ...

class WorkerRuntime(RuntimeForProcesses, Protocol):
    """The runtime a worker process runs: entered with ``async with``, not discoverable."""

    discoverable: bool

    def serve_as_worker(self) -> None:
        """Before entering: make it a worker process's runtime (it reaches its owner)."""
        ...

    async def __aenter__(self) -> WorkerRuntime: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class WorkerRuntimeFactory(Protocol):
    """Makes a worker process's runtime (the owner's runtime class)."""

    def __call__(self, *, shutdown_timeout: float) -> WorkerRuntime: ...
