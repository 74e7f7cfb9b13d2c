"""Spawning an actor that needs a resource grant, in the runtime that owns the broker.

The spawn first reserves what the actor needs (its own placement group first, if it has one,
of which it becomes the holder and whose bundle 0 it runs in), then starts the actor inline
or in a worker process. While it waits, the spawning actor is blocked on the request (for
the deadlock check), unless the wait is bounded (``spawn_timeout``, ``asyncio.wait_for``).
A spawn whose parent ends while it waits is withdrawn: a child never outlives its parent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, TypeVar

from .._core._cell import ActorCell
from .._core._options import ActorOptions
from .._core._ref import ActorRef
from .._core._spawn_progress import waiting_for
from .._processes._scheduler import Scheduler, gpu_ids
from ..resources import Granted, GroupTarget
from ._role import RuntimeHost, SpawnRequest

if TYPE_CHECKING:
    pass

A = TypeVar("A")

logger = logging.getLogger("actorrt")


_warned_inline: set[str] = set()


def _warn_inline_in_cluster(name: str) -> None:
    """Once per class: ``process=False`` cannot hold in a cluster for an actor with a grant."""
    if name not in _warned_inline:
        _warned_inline.add(name)
        logger.warning(
            "%s was spawned with process=False and resources: in a cluster an actor that holds "
            "a grant runs in a worker process on the node of its grant, so it runs there, not "
            "inline in this program (docs/cluster.md)", name,
        )


class GrantedSpawns:
    """The spawns of one runtime that need grants, from request to start."""

    def __init__(self, host: RuntimeHost, scheduler: Scheduler) -> None:
        self.host = host
        self.scheduler = scheduler
        # Spawns waiting for their grant: actor id -> (class name, name, parent id).
        self.spawning: dict[str, tuple[str, str | None, str | None]] = {}
        # Requests of spawns that wait for resources, by the parent they will be children of.
        self._child_requests: dict[str, set[str]] = {}

    async def spawn(self, request: SpawnRequest[A]) -> ActorRef[A]:
        """Reserve what ``request`` needs, then start its actor (see ``SpawnRequest``)."""
        actor_class, args, kwargs = request.actor_class, request.args, request.kwargs
        parent, requester, bounded = request.parent, request.requester, request.bounded
        host = self.host
        options = actor_class.actor_options
        actor_id = host.new_id()
        needs_grant = options.needs_grant()  # else a process actor that asks for nothing
        if needs_grant:
            self.spawning[actor_id] = (
                actor_class.cls.__name__, options.name, parent.actor_id if parent else None
            )
        try:
            grant = (
                await self._acquire(actor_id, options, parent, requester, bounded)
                if needs_grant
                else None
            )
            if parent is not None:
                host.may_start_child_of(parent, actor_class.cls.__name__)
            cell: Any
            # In a cluster, what holds a grant runs on the node of its grant.
            node = str(grant.placement.node_id) if grant and host.workers.cluster else None
            if node is not None and options.process is False:
                _warn_inline_in_cluster(actor_class.cls.__name__)
            if options.runs_in_process() or node is not None:
                cpus = grant.placement.resources.to_dict().get("CPU", 0.0) if grant else 0.0
                cell = host.workers.new_process_actor(
                    actor_class, args, kwargs, parent, actor_id, gpu_ids(grant), cpus, node
                )
                if node is not None and grant is not None and grant.placement.group is None:
                    cell.regrant = self.regrant  # its own grant: it can move if the node goes
            else:
                cell = ActorCell(host, actor_class, args, kwargs, parent, actor_id)  # type: ignore[arg-type]
            cell.grant = grant
            cell.grant_info = self.grant_info(grant)
            cell.broker_parent = requester
            return await host.start(cell)
        except BaseException:
            if host.lookup(actor_id) is None:
                self.scheduler.release(actor_id)  # its group too, if it reserved one
            raise
        finally:
            self.spawning.pop(actor_id, None)

    async def regrant(self, actor: Any) -> None:
        """A worker-process actor whose node was lost: grant it what it had, on a node
        that is there, and start its next incarnation there (cluster mode)."""
        options = actor.actor_class.actor_options
        request_id = self.scheduler.new_request_id()
        future = self.scheduler.submit(
            request_id, actor.actor_id, options.own_resources(), placement="cluster"
        )
        grant = await self.scheduler.wait(request_id, future, None)
        cpus = grant.placement.resources.to_dict().get("CPU", 0.0)
        actor.key = self.host.workers.worker_key(
            actor.actor_class, gpu_ids(grant), cpus, str(grant.placement.node_id)
        )
        actor.grant = grant
        actor.grant_info = self.grant_info(grant)

    def grant_info(self, grant: Granted | None) -> tuple[dict[str, float], Any] | None:
        """What an actor may learn of its grant: its resources, and its group and bundle."""
        if grant is None:
            return None
        placement = grant.placement
        info = None
        if placement.group is not None:
            info = self.scheduler.describe(placement.group, placement.bundle_index)
        return placement.resources.to_dict(), info

    def children_ending(self, parent: Any, error: BaseException) -> None:
        """Withdraw the spawns ``parent`` waits for, failing them with ``error``."""
        for request_id in list(self._child_requests.pop(parent.actor_id, ())):
            self.scheduler.abort(request_id, error)

    async def _acquire(
        self,
        actor_id: str,
        options: ActorOptions,
        parent: Any,
        requester: str | None,
        bounded: bool,
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
        scheduler = self.scheduler
        placement: Any = options.placement
        if options.placement_group is not None:
            group_id = scheduler.new_request_id()
            reserved = scheduler.submit(
                group_id,
                actor_id,
                bundles=list(options.placement_group),
                strategy=options.strategy,
                parent=parent_id,
                allow_empty_head=True,
            )
            waiting_for(
                f"its placement group of {len(options.placement_group)} bundle(s) to be "
                "reserved (actorrt.pending_requests() lists the request while it waits)"
            )
            await self._wait_child(group_id, reserved, waiter, pending)
            placement = GroupTarget(group_id, 0)
        elif not isinstance(placement, str | GroupTarget):
            placement = placement.target()
        request_id = scheduler.new_request_id()
        future = scheduler.submit(
            request_id, actor_id, options.own_resources(), placement=placement, parent=parent_id
        )
        waiting_for(
            "its resources to be granted (actorrt.pending_requests() lists the request while "
            "it waits)"
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
            return await self.scheduler.wait(request_id, future, waiter)
        pending.add(request_id)
        try:
            return await self.scheduler.wait(request_id, future, waiter)
        finally:
            pending.discard(request_id)
