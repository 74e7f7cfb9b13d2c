"""The runtime: owns every actor of this process and shuts them all down.

One runtime runs per process at a time. ``async with Runtime()`` runs it inside the
caller's event loop (embedding in a service); ``actorrt.run(main)`` gives a coroutine a fresh
runtime on uvloop; ``actorrt.init()`` runs one on a background thread for plain scripts.

``Runtime`` is the composition root: it runs its actors (registry, names, inline spawns,
shutdown) and delegates what depends on where it runs to the role it builds when entered
(``actorrt._roles``): the driver role in the user's program (the broker, the worker pool,
the status socket), the worker role in a worker process (the owning runtime, over its
connection). Cluster mode adds head and node roles behind the same interface.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import secrets
import time
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._cluster._files import cluster_address
from .._core import _current
from .._core._cell import ActorCell
from .._core._context import current_cell
from .._core._options import ActorOptions
from .._core._ref import ActorRef
from .._core._spawn_progress import waiting_for
from .._core._turns import Turns
from .._core._waits import WaitGraph
from .._errors import ActorDiedError, ActorNotFoundError, DeathReason, RuntimeClosedError
from .._processes._router import Workers
from .._roles._driver import DriverRole
from .._roles._role import Role, SpawnRequest, within_spawn_timeout
from .._roles._worker import WorkerRole
from ..dashboard import DashboardConfig, dashboard_config
from ..resources import NodeInventory, detect_local_node
from . import _objects as objects
from ._delegation import RoleDelegation

if TYPE_CHECKING:
    from .._core._actor import ActorClass

logger = logging.getLogger("actorrt")

T = TypeVar("T")
A = TypeVar("A")


def current_runtime() -> Runtime:
    """The runtime running in this process; ``NoRuntimeError`` if there is none."""
    return cast(Runtime, _current.current_services())


class Runtime(RoleDelegation):
    """An actor runtime bound to the event loop it is entered on.

    Args:
        num_cpus: CPUs to schedule (default: this process's affinity and cgroup quota).
        num_gpus: GPUs (default: the NVIDIA devices NVML finds, within an inherited
            ``CUDA_VISIBLE_DEVICES``; on a machine without any, ``n`` logical devices).
        memory: bytes (default: the cgroup limit, or the machine's memory).
        resources: custom resources by name, e.g. ``{"TRAIN_DRIVER_RESOURCE": 1}``.
        shutdown_timeout: seconds that leaving the ``async with`` block gives actors to stop
            gracefully (their queued messages run, then ``on_stop``) before the rest are
            killed.
        worker_env: environment variables for every worker process (an actor's own
            ``worker_env`` option adds to them).
        address: the head of an actorrt cluster, ``"HOST:PORT"``, or ``"auto"`` for the head
            started on this machine (docs/cluster.md). Its broker grants this program's
            resources and its nodes run its worker-process actors; the cluster's token is
            read from ``ACTORRT_CLUSTER_TOKEN``, the file ``ACTORRT_CLUSTER_TOKEN_FILE``
            names, or this machine's cluster directory. ``None`` (default): this machine
            alone.
        dashboard: serve the dashboard, a read-only web view of this runtime and its sweeps
            (docs/dashboard.md): ``True`` (at ``http://127.0.0.1:8265/``), a dict of
            ``host``, ``port``, ``token``, or an ``actorrt.dashboard.DashboardConfig``.
            Its URL is printed when it starts. Needs the ``dashboard`` extra (aiohttp).

    While it runs, the runtime can be inspected from another shell with ``actorrt status``:
    entering it opens a status socket and registers it in a per-user directory, and
    leaving it removes both (``actorrt._control._server``, ``docs/cli.md``; ``ACTORRT_DISCOVERY=0``
    turns this off).

    Example::

        async with actorrt.Runtime() as rt:
            counter = await Counter.spawn()
            print(await counter.incr())
    """

    def __init__(
        self,
        *,
        num_cpus: float | None = None,
        num_gpus: int | None = None,
        memory: int | None = None,
        resources: dict[str, float] | None = None,
        shutdown_timeout: float = 10.0,
        worker_env: dict[str, str] | None = None,
        address: str | None = None,
        dashboard: bool | dict[str, Any] | DashboardConfig | None = None,
    ) -> None:
        self._dashboard = dashboard_config(dashboard)
        self._cluster_address = cluster_address(address)
        if self._cluster_address is not None and any(
            value is not None for value in (num_cpus, num_gpus, memory, resources)
        ):
            raise ValueError(
                "a runtime connected to a cluster (address=...) takes its resources from the "
                "cluster's nodes; give num_cpus, num_gpus, memory and resources to "
                "`actorrt start` on each node instead"
            )
        if isinstance(shutdown_timeout, bool) or not isinstance(shutdown_timeout, int | float):
            raise TypeError(f"shutdown_timeout must be a number, got {shutdown_timeout!r}")
        if not math.isfinite(shutdown_timeout) or shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must be >= 0 and finite, got {shutdown_timeout}")
        self.shutdown_timeout = float(shutdown_timeout)
        # Overrides are checked here, at the call that made them; the machine is probed when
        # a driver runtime is entered (a worker process's runtime never probes it).
        self._node: NodeInventory | None = None
        if any(value is not None for value in (num_cpus, num_gpus, memory, resources)):
            self._node = detect_local_node(
                num_cpus=num_cpus, num_gpus=num_gpus, memory=memory, resources=resources
            )
        ActorOptions().merged(worker_env=worker_env)  # validates it
        self._worker_env = dict(worker_env or {})
        self._workers: Workers | None = None
        self._role_: Role | None = None
        self._is_worker = False
        self.runtime_id = secrets.token_hex(4)
        self.waits = WaitGraph()
        self.turns = Turns()  # idle inline actors a message reached (ActorCell._resume)
        self.closed = False
        self._closing = False
        self._entered = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._actors: dict[str, Any] = {}  # ActorCell, or ProcessActor for worker actors
        self._names: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        # Parents whose children are being ended (no new child may join them).
        self._ending: set[str] = set()
        self.started_at: float | None = None
        # Whether `actorrt status` can find this runtime (a worker process never is).
        self.discoverable = True

    def serve_as_worker(self) -> None:
        """Before entering: this runtime is a worker process's, reaching its owner over the
        connection its main attaches (``actorrt._processes._worker_main``)."""
        if self._entered:
            raise RuntimeError("a runtime's role is chosen before it is entered")
        self._is_worker = True
        self.discoverable = False  # `actorrt status` shows the owner, which knows this one

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("this Runtime has not been entered with `async with`")
        return self._loop

    @property
    def dashboard_url(self) -> str | None:
        """The dashboard's URL (with its token where it needs one), or ``None``."""
        server = getattr(self._role_, "dashboard", None)
        return server.url if server is not None else None

    async def __aenter__(self) -> Runtime:
        if self._entered:
            raise RuntimeError("a Runtime can be entered once; create a new one")
        _current.register(self)
        self._entered = True
        self._loop = asyncio.get_running_loop()
        self.started_at = time.time()
        try:
            role: Role
            if self._is_worker:
                role = WorkerRole(self)
            elif self._cluster_address is not None:
                # Only a program that joins a cluster loads its link (and TLS).
                from .._cluster._link import join_cluster

                link = await join_cluster(self._cluster_address, self.runtime_id)
                role = DriverRole(
                    self, None, self.discoverable, cluster=link, dashboard=self._dashboard
                )
            else:
                role = DriverRole(
                    self, self._node or detect_local_node(), self.discoverable,
                    dashboard=self._dashboard,
                )
            self._role_ = role
            await role.start()
        except BaseException:  # a bad environment, or cancelled: this runtime never ran
            self.closed = True
            _current.unregister(self)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop every actor (gracefully, then by kill after ``shutdown_timeout``)."""
        if self.closed or self._closing:
            return
        self._closing = True
        try:
            await self._stop_all()
            await self._await_tasks()
            if self._workers is not None:
                await self._workers.close()
                objects.sweep()  # the names of put objects its killed workers held
        finally:
            if self._role_ is not None:
                await self._role_.close()
            self.closed = True
            _current.unregister(self)

    async def _stop_all(self) -> None:
        roots = [cell for cell in self._actors.values() if cell.parent is None]
        for cell in self._actors.values():
            cell.ending_because(DeathReason.RUNTIME_SHUT_DOWN)
        if not roots:
            return
        stops = [asyncio.ensure_future(cell.stop()) for cell in roots]
        _done, pending = await asyncio.wait(stops, timeout=self.shutdown_timeout)
        if pending:
            stuck = [c.describe() for c in self._actors.values()]
            logger.warning(
                "actors did not stop within %.1f s, killing them: %s",
                self.shutdown_timeout,
                ", ".join(stuck),
            )
            for cell in list(self._actors.values()):
                cell.kill_nowait()
            await asyncio.wait(stops)
        for cell in list(self._actors.values()):  # anything spawned during the shutdown
            cell.kill_nowait()
            await asyncio.shield(cell.died)

    async def _await_tasks(self) -> None:
        """Wait until every actor task has returned, not merely reported its end."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    # ------------------------------------------------------------------ actors

    async def spawn(
        self, actor_class: ActorClass[A], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ActorRef[A]:
        """Start an actor and wait for its constructor and ``on_start``."""
        parent = current_cell.get()
        if asyncio.get_running_loop() is not self.loop:
            request = SpawnRequest(actor_class, args, kwargs)
            return await self.call_on_loop(self.spawn_child(request))
        if parent is not None and parent.runtime is not self:
            parent = None
        return await self.spawn_child(SpawnRequest(actor_class, args, kwargs, parent))

    async def spawn_child(self, request: SpawnRequest[A]) -> ActorRef[A]:
        """Start an actor as ``request.parent``'s child: one that needs a grant or a process
        through the role, any other inline here."""
        parent = request.parent
        if self._closing:
            raise RuntimeClosedError("the runtime is shutting down; no new actors start")
        if parent is not None and not parent.accepting and parent.died.done():
            raise RuntimeClosedError(f"{parent.describe()} has ended; it cannot spawn")
        options = request.actor_class.actor_options
        if options.runs_in_process() or options.needs_grant():
            return await self._role.spawn(request)
        return await within_spawn_timeout(request, self._spawn_inline)

    async def _spawn_inline(self, request: SpawnRequest[A]) -> ActorRef[A]:
        actor_class, parent = request.actor_class, request.parent
        args, kwargs, requester = request.args, request.kwargs, request.requester
        actor_id = self.new_id()
        if parent is not None:
            self.may_start_child_of(parent, actor_class.cls.__name__)
        cell: Any = ActorCell(self, actor_class, args, kwargs, parent, actor_id)
        cell.grant = None
        cell.grant_info = None
        cell.broker_parent = requester
        return await self.start(cell)

    def may_start_child_of(self, parent: Any, what: str) -> None:
        if parent.died.done() or parent.actor_id in self._ending:
            # Its parent ended (or is ending) while it waited: it must not outlive it.
            raise self.parent_gone(parent, what)

    def parent_gone(self, parent: Any, what: str) -> BaseException:
        if parent.died.done():
            return parent.died.result()  # type: ignore[no-any-return]
        return ActorDiedError(
            f"{parent.describe()} is ending, so the {what} it was spawning does not start "
            "(a child never outlives its parent); its resource request was withdrawn",
            actor=parent.describe(),
            reason="stopped",
        )

    def children_ending(self, parent: Any) -> None:
        """``parent``'s children are being ended: the spawns it still waits for are
        withdrawn, and none of them may start until it restarts or is gone."""
        self._ending.add(parent.actor_id)
        self._role.children_ending(parent)

    def children_may_start(self, parent: Any) -> None:
        """``parent`` restarted: its new incarnation may spawn children again."""
        self._ending.discard(parent.actor_id)

    async def start(self, cell: Any) -> ActorRef[Any]:
        """Register ``cell`` and start it; returns its ref once ``on_start`` has run."""
        self._register(cell)
        started: asyncio.Future[None] = self.loop.create_future()
        waiting_for(f"{cell.describe()} to run its constructor and on_start")
        cell.start(started)
        assert cell.task is not None
        self._tasks.add(cell.task)
        cell.task.add_done_callback(self._tasks.discard)
        try:
            await asyncio.shield(started)
        except asyncio.CancelledError:
            cell.kill_nowait()  # the caller gave up: withdraw the half-started actor
            raise
        except BaseException:
            await asyncio.shield(cell.died)
            raise
        return ActorRef(cell)

    def _register(self, cell: Any) -> None:
        if cell.name is not None:
            existing = self._names.get(cell.name)
            if existing is not None:
                raise ValueError(
                    f"the name {cell.name!r} is taken by {existing.describe()}; names are "
                    "unique among live actors"
                )
            self._names[cell.name] = cell
        self._actors[cell.actor_id] = cell
        if cell.parent is not None:
            cell.parent.adopt(cell)
            broker_parent = getattr(cell, "broker_parent", None) or cell.parent.actor_id
            self._role.registered(cell.actor_id, broker_parent)

    def forget(self, cell: Any) -> None:
        """Drop an ended actor from the registries and give back what it held."""
        self._actors.pop(cell.actor_id, None)
        if self._role_ is not None:
            self._role_.ended(cell.actor_id)
        name = cell.name
        if name is not None and self._names.get(name) is cell:
            del self._names[name]
        self.waits.forget(cell.actor_id)
        self._ending.discard(cell.actor_id)

    def new_id(self) -> str:
        return f"{self.runtime_id}-{next(self._ids)}"

    # ------------------------------------------------------------ registry

    def lookup(self, actor_id: str) -> Any:
        """The cell or proxy of a live actor of this runtime, or ``None``."""
        return self._actors.get(actor_id)

    def actors(self) -> Mapping[str, Any]:
        """Every live actor of this runtime, by id (read it; do not change it)."""
        return self._actors

    def describe_id(self, actor_id: str) -> str | None:
        """``Class(id=..., name=...)`` for an actor id this runtime knows of, else ``None``."""
        target = self._actors.get(actor_id)
        if target is not None:
            return str(target.describe())
        return self._role.describe_other(actor_id)

    def get_actor(self, name: str) -> ActorRef[Any]:
        """The live actor of this runtime named ``name``."""
        if not isinstance(name, str):
            raise TypeError(f"actor names are strings, got {name!r}")
        cell = self._names.get(name)
        if cell is None:
            known = ", ".join(sorted(map(repr, self._names))) or "none"
            raise ActorNotFoundError(
                f"no live actor is named {name!r} (named actors: {known})"
            )
        return ActorRef(cell)

    async def find_actor(self, name: str) -> ActorRef[Any]:
        """The live actor named ``name``, here or (from a worker) in the owning runtime."""
        cell = self._names.get(name)
        if cell is not None:
            return ActorRef(cell)
        return await self._role.get_actor(name, list(self._names))

    def live_actors(self) -> list[ActorRef[Any]]:
        """Refs to every actor that has not ended."""
        return [ActorRef(cell) for cell in self._actors.values()]

    def spawning(self) -> dict[str, tuple[str, str | None, str | None]]:
        """Spawns that wait for resources: actor id -> (class name, name, parent id)."""
        return self._role.spawning()

    def relayed(self) -> dict[str, int]:
        """Calls and tells this process passed on from one worker process to another (the
        relay a direct connection between the two avoids), since the runtime started."""
        if self._workers is None:
            return {"calls": 0, "tells": 0}
        return dict(self._workers.host.relayed)

    @property
    def workers(self) -> Workers:
        """The cross-process side of this runtime, made on first use."""
        if self._workers is None:
            self._workers = Workers(self, self._worker_env)
        return self._workers

    def worker_connected(self, worker_id: str, conn: Any) -> bool:
        return self.workers.worker_connected(worker_id, conn)

    async def host_actor(
        self,
        actor_id: str,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        restart_count: int,
        grant_info: Any,
    ) -> None:
        """In a worker: construct the actor its owner placed here."""
        cell = self.workers.host_cell(actor_id, actor_class, args, kwargs, restart_count)
        cell.grant_info = tuple(grant_info) if grant_info is not None else None
        await self.start(cell)

    async def call_on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runtime's loop from another thread's loop."""
        if self.closed:
            coro.close()
            raise RuntimeClosedError("the runtime has shut down")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wrap_future(future)

