"""The runtime: owns every actor of this process and shuts them all down.

One runtime runs per process at a time. ``async with Runtime()`` runs it inside the
caller's event loop (embedding in a service); ``actorrt.run(main)`` gives a coroutine a fresh
runtime on uvloop; ``actorrt.init()`` runs one on a background thread for plain scripts.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._control._server import StatusServer
from ._control._status import snapshot
from ._core import _current
from ._core._cell import ActorCell
from ._core._context import PlacementInfo, current_cell
from ._core._options import ActorOptions
from ._core._ref import ActorRef
from ._core._waits import WaitGraph
from ._errors import (
    ActorDiedError,
    ActorNotFoundError,
    ResourceError,
    RuntimeClosedError,
)
from ._placement._placement_group import PlacementGroup
from ._placement._router import Workers
from ._placement._scheduler import DRIVER, Grants, gpu_ids
from ._wire._messages import AskDeadlock, ReserveGroup
from .resources import (
    Granted,
    GroupTarget,
    PendingRequest,
    Resources,
    detect_local_node,
    parse_bundles,
)

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

if TYPE_CHECKING:
    from ._core._actor import ActorClass

logger = logging.getLogger("actorrt")

T = TypeVar("T")
A = TypeVar("A")

def current_runtime() -> Runtime:
    """The runtime running in this process; ``NoRuntimeError`` if there is none."""
    return cast(Runtime, _current.current_services())


class Runtime:
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
    ) -> None:
        if isinstance(shutdown_timeout, bool) or not isinstance(shutdown_timeout, int | float):
            raise TypeError(f"shutdown_timeout must be a number, got {shutdown_timeout!r}")
        if not math.isfinite(shutdown_timeout) or shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must be >= 0 and finite, got {shutdown_timeout}")
        self.shutdown_timeout = float(shutdown_timeout)
        self._node = detect_local_node(
            num_cpus=num_cpus, num_gpus=num_gpus, memory=memory, resources=resources
        )
        self._grants: Grants | None = None
        self._revoking: dict[Any, list[asyncio.Future[Any]]] = {}
        self._group_specs: dict[Any, tuple[tuple[Resources, ...], str]] = {}
        self._held_groups: dict[str, Any] = {}  # actor id -> the group it reserved
        self._worker_groups: dict[str, asyncio.Future[Granted]] = {}  # reserved for workers
        ActorOptions().merged(worker_env=worker_env)  # validates it
        self._worker_env = dict(worker_env or {})
        self._workers: Workers | None = None
        self.runtime_id = secrets.token_hex(4)
        self.waits = WaitGraph()
        self.closed = False
        self._closing = False
        self._entered = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._actors: dict[str, Any] = {}  # ActorCell, or ProcessActor for worker actors
        self._names: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        # Spawns waiting for their grant: actor id -> (class name, name, parent id).
        self._spawning: dict[str, tuple[str, str | None, str | None]] = {}
        # Inline actors inside a worker that spawned through this runtime (a trial's helper):
        # id -> description, and the worker actor each belongs to (they end with it).
        self._foreign: dict[str, str] = {}
        self._foreign_of: dict[str, set[str]] = {}
        # Requests of spawns that wait for resources, by the parent they will be children
        # of; and parents whose children are being ended (no new child may join them).
        self._child_requests: dict[str, set[str]] = {}
        self._ending: set[str] = set()
        # Waiters in workers that await asks, and the connection that reported them.
        self._edge_conns: dict[Any, tuple[Any, int]] = {}
        self.started_at: float | None = None
        # Whether `actorrt status` can find this runtime; worker processes turn it off.
        self.discoverable = True
        self._status_server: StatusServer | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("this Runtime has not been entered with `async with`")
        return self._loop

    async def __aenter__(self) -> Runtime:
        if self._entered:
            raise RuntimeError("a Runtime can be entered once; create a new one")
        _current.register(self)
        self._entered = True
        self._loop = asyncio.get_running_loop()
        self._grants = Grants(self, self._node)
        self.waits.listener = self._grants.blocked_on_holder
        self.started_at = time.time()
        if self.discoverable:
            try:
                self._status_server = await StatusServer.start(
                    self.runtime_id, functools.partial(snapshot, self)
                )
            except BaseException:  # cancelled while opening: this runtime never ran
                self._grants.close()
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
        finally:
            if self._status_server is not None:
                await self._status_server.close()
            if self._grants is not None:
                self._grants.close()
            self.closed = True
            _current.unregister(self)

    async def _stop_all(self) -> None:
        roots = [cell for cell in self._actors.values() if cell.parent is None]
        for cell in self._actors.values():
            cell._end_reason = cell._end_reason or ("runtime shut down", None)
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
            return await self.call_on_loop(self._spawn(actor_class, args, kwargs, None))
        if parent is not None and parent.runtime is not self:
            parent = None
        return await self._spawn(actor_class, args, kwargs, parent)

    async def _spawn(
        self,
        actor_class: ActorClass[A],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: ActorCell | None,
        requester: str | None = None,
        bounded: bool = False,
    ) -> ActorRef[A]:
        """``requester``: the actor that awaits this spawn, when it is not ``parent`` itself
        (an inline actor inside ``parent``'s worker process, which the broker knows as a
        child of ``parent``). ``bounded``: the spawn's caller bounds its wait."""
        if self._closing:
            raise RuntimeClosedError("the runtime is shutting down; no new actors start")
        if parent is not None and not parent.accepting and parent.died.done():
            raise RuntimeClosedError(f"{parent.describe()} has ended; it cannot spawn")
        options = actor_class.actor_options
        in_process = options.runs_in_process()
        needs_grant = options.needs_grant()
        if (in_process or needs_grant) and self.workers.head is not None:
            # In a worker, resources and processes come from the owning runtime (which
            # applies the spawn_timeout option, if any).
            return await self.workers.spawn_via_owner(actor_class, args, kwargs)
        timeout = options.spawn_timeout
        if timeout is None:
            return await self._spawn_here(actor_class, args, kwargs, parent, requester, bounded)
        try:
            return await asyncio.wait_for(
                self._spawn_here(actor_class, args, kwargs, parent, requester, True), timeout
            )
        except TimeoutError:
            name = f" name={options.name!r}" if options.name else ""
            raise TimeoutError(
                f"spawning {actor_class.cls.__name__}({name.strip()}) did not finish within "
                f"spawn_timeout={timeout} s; its resource request was withdrawn and nothing "
                "of it was kept (while a spawn waits, actorrt.pending_requests() says what "
                "for)"
            ) from None

    async def _spawn_here(
        self,
        actor_class: ActorClass[A],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: ActorCell | None,
        requester: str | None,
        bounded: bool,
    ) -> ActorRef[A]:
        options = actor_class.actor_options
        in_process = options.runs_in_process()
        needs_grant = options.needs_grant()
        actor_id = self._new_id()
        if needs_grant:
            self._spawning[actor_id] = (
                actor_class.cls.__name__, options.name, parent.actor_id if parent else None
            )
        try:
            grant = (
                await self._acquire(actor_id, options, parent, requester, bounded)
                if needs_grant
                else None
            )
            if parent is not None and (parent.died.done() or parent.actor_id in self._ending):
                # Its parent ended (or is ending) while it waited: it must not outlive it.
                raise self._parent_gone(parent, actor_class.cls.__name__)
            cell: Any
            if in_process:
                cpus = grant.placement.resources.to_dict().get("CPU", 0.0) if grant else 0.0
                cell = self.workers.new_process_actor(
                    actor_class, args, kwargs, parent, actor_id, gpu_ids(grant), cpus
                )
            else:
                cell = ActorCell(self, actor_class, args, kwargs, parent, actor_id)
            cell.grant = grant
            cell.grant_info = self.grant_info(grant)
            cell.broker_parent = requester
            return await self._start(cell)
        except BaseException:
            if actor_id not in self._actors:
                self.grants.release(actor_id)
                self._group_specs.pop(self._held_groups.pop(actor_id, None), None)
            raise
        finally:
            self._spawning.pop(actor_id, None)

    def _parent_gone(self, parent: Any, what: str) -> BaseException:
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
        for request_id in list(self._child_requests.pop(parent.actor_id, ())):
            self.grants.abort(request_id, self._parent_gone(parent, "actor"))

    def children_may_start(self, parent: Any) -> None:
        """``parent`` restarted: its new incarnation may spawn children again."""
        self._ending.discard(parent.actor_id)

    async def _acquire(
        self,
        actor_id: str,
        options: ActorOptions,
        parent: Any,
        requester: str | None = None,
        bounded: bool = False,
    ) -> Granted:
        """Reserve what a new actor needs (its group first, if it has one). A ``bounded``
        wait (``spawn_timeout``) ends by itself: no wait edge."""
        parent_id = requester or (parent.actor_id if parent is not None else None)
        waiter = None if bounded else parent_id
        pending = (
            None if parent is None else self._child_requests.setdefault(parent.actor_id, set())
        )
        try:
            return await self._acquire_in(actor_id, options, parent_id, waiter, pending)
        finally:
            if (
                pending is not None
                and not pending
                and parent is not None
                and self._child_requests.get(parent.actor_id) is pending
            ):
                del self._child_requests[parent.actor_id]

    async def _acquire_in(
        self,
        actor_id: str,
        options: ActorOptions,
        parent_id: str | None,
        waiter: str | None,
        pending: set[str] | None,
    ) -> Granted:
        grants = self.grants
        placement: Any = options.placement
        if options.placement_group is not None:
            group_id = grants.new_request_id()
            reserved = grants.submit(
                group_id,
                actor_id,
                bundles=list(options.placement_group),
                strategy=options.strategy,
                parent=parent_id,
                allow_empty_head=True,
            )
            bundles = parse_bundles(options.placement_group, allow_empty_head=True)
            self._group_specs[group_id] = (bundles, options.strategy)
            self._held_groups[actor_id] = group_id
            await self._wait_child(group_id, reserved, waiter, pending)
            placement = GroupTarget(group_id, 0)
        elif not isinstance(placement, str | GroupTarget):
            placement = placement.target()
        request_id = grants.new_request_id()
        future = grants.submit(
            request_id, actor_id, options.own_resources(), placement=placement, parent=parent_id
        )
        return await self._wait_child(request_id, future, waiter, pending)

    async def _wait_child(
        self,
        request_id: str,
        future: asyncio.Future[Granted],
        waiter: str | None,
        pending: set[str] | None,
    ) -> Granted:
        if pending is None:
            return await self.grants.wait(request_id, future, waiter)
        pending.add(request_id)
        try:
            return await self.grants.wait(request_id, future, waiter)
        finally:
            pending.discard(request_id)

    async def _start(self, cell: Any) -> ActorRef[Any]:
        self._register(cell)
        started: asyncio.Future[None] = self.loop.create_future()
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

    @property
    def grants(self) -> Grants:
        """The bridge to the resource broker (made when the runtime is entered)."""
        if self._grants is None:
            raise RuntimeError("this Runtime has not been entered with `async with`")
        return self._grants

    def reserve_group(
        self, bundles: tuple[Resources, ...], strategy: str, holder: str | None
    ) -> PlacementGroup:
        """Submit a placement group reservation (``actorrt.placement_group``)."""
        if _running_loop() is not self.loop:

            async def on_loop() -> PlacementGroup:
                return self.reserve_group(bundles, strategy, holder)

            return asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result()
        head = self._workers.head if self._workers is not None else None
        if head is not None:
            return self._reserve_via_owner(head, bundles, strategy, holder)
        group_id = self.grants.new_request_id()
        owner = holder if holder is not None else DRIVER
        future = self.grants.submit(
            group_id, owner, bundles=list(bundles), strategy=strategy, placement="cluster"
        )
        self._group_specs[group_id] = (bundles, strategy)
        return PlacementGroup(self, group_id, bundles, strategy, future, owner)

    def _reserve_via_owner(
        self, head: Any, bundles: tuple[Resources, ...], strategy: str, holder: str | None
    ) -> PlacementGroup:
        """In a worker: the owning runtime reserves the group, held by this worker's actor
        (so the group goes when that actor ends)."""
        cell = self.lookup(holder) if holder is not None else None
        while cell is not None and cell.parent is not None:
            cell = cell.parent  # the actor the owner placed here, which it knows
        owner = cell.actor_id if cell is not None else None
        group_id = f"{self.runtime_id}-g{next(self._ids)}"
        specs = [bundle.to_dict() for bundle in bundles]
        accepted = head.request(ReserveGroup(group_id, specs, strategy, owner))
        return PlacementGroup(self, group_id, bundles, strategy, accepted, owner or DRIVER)

    async def reserve_for_worker(
        self, group_id: str, specs: list[dict[str, float]], strategy: str, holder: str | None
    ) -> None:
        """In the owner: a worker's ``placement_group()``. Raises at once if infeasible."""
        bundles = parse_bundles(specs)
        future = self.grants.submit(
            group_id,
            holder if holder is not None else DRIVER,
            bundles=list(bundles),
            strategy=strategy,
            placement="cluster",
        )
        self._group_specs[group_id] = (bundles, strategy)
        self._worker_groups[group_id] = future

    async def ready_for_worker(self, group_id: str, requester: str | None) -> None:
        future = self._worker_groups.get(group_id)
        if future is None:
            raise ResourceError(f"placement group {group_id} was removed")
        await self.grants.wait(group_id, future, requester)

    async def remove_for_worker(self, group_id: str) -> None:
        self._worker_groups.pop(group_id, None)
        self.grants.cancel(group_id)
        self.forget_group(group_id)
        await self.wait_revoked(group_id)

    def forget_group(self, group_id: Any) -> None:
        self._group_specs.pop(group_id, None)

    def grant_info(self, grant: Granted | None) -> tuple[dict[str, float], Any] | None:
        """What an actor may learn of its grant: its resources and its group and bundle."""
        if grant is None:
            return None
        placement = grant.placement
        info = None
        if placement.group is not None and placement.group in self._group_specs:
            bundles, strategy = self._group_specs[placement.group]
            specs = [bundle.to_dict() for bundle in bundles]
            info = PlacementInfo(str(placement.group), specs, strategy, placement.bundle_index)
        return placement.resources.to_dict(), info

    def revoked(self, holder: Any, group: Any) -> None:
        """The broker ended ``holder``'s grant in a removed group: that actor stops."""
        target = self.lookup(holder)
        if target is None:
            return
        self._revoking.setdefault(group, []).append(target.died)
        target._end_reason = ("placement group removed", None)
        target.kill_nowait()

    async def wait_revoked(self, group: Any) -> None:
        deaths = self._revoking.pop(group, [])
        if deaths:
            await asyncio.gather(*(asyncio.shield(d) for d in deaths))

    def cluster_resources(self) -> dict[str, float]:
        return self.grants.broker.total()

    def available_resources(self) -> dict[str, float]:
        return self.grants.broker.available()

    def pending_requests(self) -> list[PendingRequest]:
        return self.grants.pending()

    def spawning(self) -> dict[str, tuple[str, str | None, str | None]]:
        """Spawns that wait for resources: actor id -> (class name, name, parent id)."""
        return dict(self._spawning)

    @property
    def workers(self) -> Workers:
        """The cross-process side of this runtime, made on first use."""
        if self._workers is None:
            self._workers = Workers(self, self._worker_env)
        return self._workers

    def lookup(self, actor_id: str) -> Any:
        """The cell or proxy of a live actor of this runtime, or ``None``."""
        return self._actors.get(actor_id)

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
        await self._start(cell)

    async def spawn_for_worker(
        self,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        chain: list[tuple[str, str]] | None,
        bounded: bool = False,
    ) -> ActorRef[Any]:
        """A worker's actor spawns a worker-process actor: it becomes that actor's child.
        ``bounded``: the worker bounds the wait (``asyncio.wait_for``): no wait edge.

        ``chain`` is the spawning actor and its ancestors in the worker, ``(id, description)``
        nearest first, up to the actor this runtime placed there. An inline actor of the worker
        (a trial's helper) is unknown here: it is recorded as a child of the worker's actor,
        so its spawns are captured into that actor's placement group, its waits are seen by
        the deadlock check, and the new actor ends with the worker's actor.
        """
        parent = None
        helpers: list[tuple[str, str]] = []
        for actor_id, described in chain or ():
            parent = self.lookup(actor_id)
            if parent is not None:
                break
            helpers.append((actor_id, described))
        requester = None
        if parent is not None and helpers:
            known = self._foreign_of.setdefault(parent.actor_id, set())
            above = parent.actor_id
            for actor_id, described in reversed(helpers):
                self.grants.set_parent(actor_id, above)
                self._foreign[actor_id] = described
                known.add(actor_id)
                above = actor_id
            requester = helpers[0][0]
        return await self._spawn(
            actor_class.options(process=True), args, kwargs, parent, requester, bounded
        )

    def describe_id(self, actor_id: str) -> str | None:
        """``Class(id=..., name=...)`` for an actor id this runtime knows of, else ``None``."""
        target = self._actors.get(actor_id)
        if target is not None:
            return str(target.describe())
        spawning = self._spawning.get(actor_id)
        if spawning is not None:
            cls_name, name, _ = spawning
            named = f" name={name!r}" if name else ""
            return f"{cls_name}(id={actor_id}{named})"
        return self._foreign.get(actor_id)

    def edge_reported(self, waiter: Any, conn: Any, added: bool) -> None:
        """A worker reported that ``waiter`` (an actor there) began or ended awaiting an ask."""
        known = self._edge_conns.get(waiter)
        count = (known[1] if known is not None else 0) + (1 if added else -1)
        if count > 0:
            self._edge_conns[waiter] = (conn, count)
        else:
            self._edge_conns.pop(waiter, None)

    def ask_deadlocked(self, waiter: Any, target: Any, error: BaseException) -> None:
        """The broker proved that ``waiter``'s wait on ``target`` can never end: end it."""
        if self.waits.fail(waiter, target, error):
            return
        known = self._edge_conns.get(waiter)
        if known is not None and not known[0].is_closing():
            known[0].notify(AskDeadlock(waiter, target, error))

    def _new_id(self) -> str:
        return f"{self.runtime_id}-{next(self._ids)}"

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
            cell.parent.children.add(cell)
            broker_parent = getattr(cell, "broker_parent", None) or cell.parent.actor_id
            self.grants.set_parent(cell.actor_id, broker_parent)

    def forget(self, cell: Any) -> None:
        """Drop an ended actor from the registries and give back what it held."""
        self._actors.pop(cell.actor_id, None)
        if self._grants is not None:
            self._grants.release(cell.actor_id)
        group = self._held_groups.pop(cell.actor_id, None)
        if group is not None:
            self._group_specs.pop(group, None)
        name = cell.name
        if name is not None and self._names.get(name) is cell:
            del self._names[name]
        self.waits.forget(cell.actor_id)
        self._ending.discard(cell.actor_id)
        self._edge_conns.pop(cell.actor_id, None)
        for helper in self._foreign_of.pop(cell.actor_id, ()):
            # The inline actors of its worker ended with it.
            self._foreign.pop(helper, None)
            self._edge_conns.pop(helper, None)
            if self._grants is not None:
                self._grants.release(helper)

    def get_actor(self, name: str) -> ActorRef[Any]:
        if not isinstance(name, str):
            raise TypeError(f"actor names are strings, got {name!r}")
        cell = self._names.get(name)
        if cell is None:
            known = ", ".join(sorted(map(repr, self._names))) or "none"
            raise ActorNotFoundError(
                f"no live actor is named {name!r} (named actors: {known})"
            )
        return ActorRef(cell)

    def live_actors(self) -> list[ActorRef[Any]]:
        """Refs to every actor that has not ended."""
        return [ActorRef(cell) for cell in self._actors.values()]

    async def call_on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runtime's loop from another thread's loop."""
        if self.closed:
            coro.close()
            raise RuntimeClosedError("the runtime has shut down")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wrap_future(future)


def cluster_resources() -> dict[str, float]:
    """Everything the cluster has, by resource name (GPU: the number of devices)."""
    return _on_owner(lambda rt: rt.cluster_resources())


def available_resources() -> dict[str, float]:
    """What is free now; reserved placement groups are not free."""
    return _on_owner(lambda rt: rt.available_resources())


def pending_requests() -> list[PendingRequest]:
    """Every waiting resource request, with the reason it waits (``.reason``)."""
    return _on_owner(lambda rt: rt.pending_requests())


def _on_owner(read: Callable[[Runtime], T]) -> T:
    runtime = current_runtime()
    if runtime._workers is not None and runtime._workers.head is not None:
        raise RuntimeError(
            "resource views are read in the driver program (the owning runtime), not in a "
            "worker process; pass what an actor needs in a message"
        )
    if _running_loop() is runtime.loop:
        return read(runtime)

    async def on_loop() -> T:
        return read(runtime)

    # From another thread (the sync facade's caller): read on the runtime's own loop.
    return asyncio.run_coroutine_threadsafe(on_loop(), runtime.loop).result()


def get_gpu_ids() -> list[int | str]:
    """The GPU ids this actor may use: those in ``CUDA_VISIBLE_DEVICES`` (ints where numeric).

    In an inline actor with a GPU grant, that grant's devices.
    """
    cell = current_cell.get()
    grant = getattr(cell, "grant", None)
    if grant is not None and os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        ids: list[str] = list(gpu_ids(grant))
    else:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [part.strip() for part in visible.split(",") if part.strip()]
    return [int(i) if i.isdigit() else i for i in ids]


def run(main: Callable[[], Awaitable[T]] | Coroutine[Any, Any, T], **runtime_kwargs: Any) -> T:
    """Run ``main`` (an async function or a coroutine) with a fresh runtime on uvloop.

    Returns what ``main`` returns; the runtime shuts down when it ends.
    """
    import uvloop

    async def runner() -> T:
        async with Runtime(**runtime_kwargs):
            if asyncio.iscoroutine(main):
                return await main
            if callable(main):
                return await main()
            raise TypeError(f"actorrt.run() takes an async function or coroutine, got {main!r}")

    if not (asyncio.iscoroutine(main) or callable(main)):
        raise TypeError(f"actorrt.run() takes an async function or coroutine, got {main!r}")
    result: T = uvloop.run(runner())
    return result
