"""The driver role: the user's program's runtime, which owns the resources.

It owns the scheduler (the bridge to the resource broker, over the node this process
detected), the worker pool (through ``runtime.workers``), the status socket that
``actorrt status`` reads and, when asked for, the dashboard; and it serves the worker
processes it started: their spawns, their placement groups and their wait edges arrive over
their connections.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._control._server import StatusServer
from .._control._status import snapshot
from .._core._context import PlacementInfo
from .._core._ref import ActorRef
from .._core._waits import WaitGraph
from .._errors import ActorNotFoundError, DeathReason
from .._processes._scheduler import DRIVER, Scheduler
from .._wire._auth import secret_to_text
from .._wire._messages import AskDeadlock
from ..dashboard._config import DashboardConfig
from ..dashboard._state import RuntimeState
from ..resources import Broker, NodeInventory, PendingRequest, Resources, parse_bundles
from ._granting import GrantedSpawns
from ._role import RuntimeHost, SpawnRequest, within_spawn_timeout

if TYPE_CHECKING:
    from .._cluster._link import ClusterLink
    from .._core._actor import ActorClass
    from ..dashboard._server import DashboardServer

A = TypeVar("A")


class DriverRole:
    """The role of the runtime that owns the broker (see the module docstring)."""

    def __init__(
        self,
        host: RuntimeHost,
        node: NodeInventory | None,
        discoverable: bool,
        cluster: ClusterLink | None = None,
        dashboard: DashboardConfig | None = None,
    ) -> None:
        self.host = host
        self.loop = host.loop
        self._discoverable = discoverable
        self.link = cluster
        if cluster is None:
            self.scheduler = Scheduler(self, node)
        else:
            # The head's broker grants; the nodes' agents start the workers.
            self.scheduler = Scheduler(self, None, cast(Broker, cluster.broker))
            cluster.broker.deliver = self.scheduler.deliver
            host.workers.cluster = cluster
        self.spawns = GrantedSpawns(host, self.scheduler)
        # Inline actors inside a worker that spawned through this runtime (a trial's helper):
        # id -> description, and the worker actor each belongs to (they end with it).
        self._foreign: dict[str, str] = {}
        self._foreign_of: dict[str, set[str]] = {}
        # Waiters in workers that await asks, and the connection that reported them.
        self._edge_conns: dict[Any, tuple[Any, set[Any]]] = {}
        self._status_server: StatusServer | None = None
        self._dashboard_config = dashboard
        self.dashboard: DashboardServer | None = None

    # ------------------------------------------------------------ the Role interface

    @property
    def placement(self) -> DriverRole:
        return self

    @property
    def resources(self) -> DriverRole:
        return self

    @property
    def owner(self) -> DriverRole:
        return self

    async def start(self) -> None:
        self.host.waits.listener = self.scheduler.blocked_on_holder
        if self._discoverable:
            try:
                self._status_server = await StatusServer.start(
                    self.host.runtime_id, functools.partial(snapshot, self.host)  # type: ignore[arg-type]
                )
            except BaseException:  # cancelled while opening: this runtime never ran
                self.scheduler.close()
                raise
        if self._dashboard_config is not None:
            try:
                self.dashboard = await self._start_dashboard(self._dashboard_config)
            except BaseException:  # a busy port, or cancelled: this runtime never ran
                if self._status_server is not None:
                    await self._status_server.close()
                self.scheduler.close()
                raise

    async def _start_dashboard(self, config: DashboardConfig) -> DashboardServer:
        from ..dashboard._server import DashboardServer  # only a runtime that shows one

        link = self.link
        token = None if link is None else secret_to_text(link.token)
        scheduler = self.scheduler
        state = RuntimeState(
            self.host,  # type: ignore[arg-type]
            lambda: scheduler.deadlocks,
            (lambda: None) if link is None else link.view,
        )
        server = DashboardServer(config, state, cluster_token=token)
        await server.start()
        return server

    async def close(self) -> None:
        if self.dashboard is not None:
            await self.dashboard.close()
        if self._status_server is not None:
            await self._status_server.close()
        self.scheduler.close()
        if self.link is not None:
            await self.link.close()

    async def spawn(self, request: SpawnRequest[A]) -> ActorRef[A]:
        return await within_spawn_timeout(request, self.spawns.spawn)

    def registered(self, actor_id: str, parent_id: str) -> None:
        self.scheduler.set_parent(actor_id, parent_id)

    def ended(self, actor_id: str) -> None:
        self.scheduler.release(actor_id)
        self._edge_conns.pop(actor_id, None)
        for helper in self._foreign_of.pop(actor_id, ()):
            # The inline actors of its worker ended with it.
            self._foreign.pop(helper, None)
            self._edge_conns.pop(helper, None)
            self.scheduler.release(helper)

    def children_ending(self, parent: Any) -> None:
        self.spawns.children_ending(parent, self.host.parent_gone(parent, "actor"))

    async def get_actor(self, name: str, known: list[str]) -> ActorRef[Any]:
        listed = ", ".join(sorted(map(repr, known))) or "none"
        raise ActorNotFoundError(f"no live actor is named {name!r} (named actors: {listed})")

    def describe_other(self, actor_id: str) -> str | None:
        spawning = self.spawns.spawning.get(actor_id)
        if spawning is not None:
            cls_name, name, _ = spawning
            named = f" name={name!r}" if name else ""
            return f"{cls_name}(id={actor_id}{named})"
        return self._foreign.get(actor_id)

    def spawning(self) -> dict[str, tuple[str, str | None, str | None]]:
        return dict(self.spawns.spawning)

    # ------------------------------------------------- resource views (ResourceViews)

    def cluster(self) -> dict[str, float]:
        return self.scheduler.broker.total()

    def available(self) -> dict[str, float]:
        return self.scheduler.broker.available()

    def pending(self) -> list[PendingRequest]:
        return self.scheduler.pending()

    # ---------------------------------------------- placement groups (PlacementService)

    reserve_grants = True  # the future reserve() returns is the grant

    def reserve(
        self, bundles: tuple[Resources, ...], strategy: str, holder: str | None
    ) -> tuple[str, asyncio.Future[Any], str]:
        group_id = self.scheduler.new_request_id()
        owner = holder if holder is not None else DRIVER
        future = self.scheduler.submit(
            group_id, owner, bundles=list(bundles), strategy=strategy, placement="cluster"
        )
        return group_id, future, owner

    async def ready(
        self, group_id: str, accepted: asyncio.Future[Any], requester: str | None
    ) -> None:
        if accepted.done() and not accepted.cancelled() and accepted.exception() is None:
            return  # reserved at once: nothing to wait for
        await self.scheduler.wait(group_id, accepted, requester)

    def withdraw(self, group_id: str) -> None:
        self.scheduler.cancel(group_id)

    async def remove(self, group_id: str) -> None:
        deaths = self.scheduler.remove_group(group_id)
        if deaths:
            await asyncio.gather(*(asyncio.shield(died) for died in deaths))

    def describe(self, group_id: str, bundle_index: int | None) -> PlacementInfo | None:
        return self.scheduler.describe(group_id, bundle_index)

    # ----------------------------------------------- serving workers (OwnerSide)

    async def reserve_for_worker(
        self, group_id: str, specs: list[dict[str, float]], strategy: str, holder: str | None
    ) -> None:
        """A worker's ``placement_group()``. Raises at once if infeasible."""
        self.scheduler.submit(
            group_id,
            holder if holder is not None else DRIVER,
            bundles=list(parse_bundles(specs)),
            strategy=strategy,
            placement="cluster",
        )

    async def ready_for_worker(self, group_id: str, requester: str | None) -> None:
        await self.scheduler.group_ready(group_id, requester)

    async def remove_for_worker(self, group_id: str) -> None:
        await self.remove(group_id)

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
            parent = self.host.lookup(actor_id)
            if parent is not None:
                break
            helpers.append((actor_id, described))
        requester = None
        if parent is not None and helpers:
            known = self._foreign_of.setdefault(parent.actor_id, set())
            above = parent.actor_id
            for actor_id, described in reversed(helpers):
                self.scheduler.set_parent(actor_id, above)
                self._foreign[actor_id] = described
                known.add(actor_id)
                above = actor_id
            requester = helpers[0][0]
        return await self.host.spawn_child(
            SpawnRequest(
                actor_class.options(process=True), args, kwargs, parent, requester, bounded
            )
        )

    def edge_reported(self, waiter: Any, target: Any, conn: Any, added: bool) -> None:
        """A worker reported that ``waiter`` (an actor there) awaits an ask to ``target``
        (``added``), or no longer does."""
        known = self._edge_conns.get(waiter)
        targets = known[1] if known is not None else set()
        if added:
            targets.add(target)
        else:
            targets.discard(target)
        if targets:
            self._edge_conns[waiter] = (conn, targets)
        else:
            self._edge_conns.pop(waiter, None)

    # ------------------------------------------------ the scheduler's host (SchedulerHost)

    def lookup(self, actor_id: str) -> Any:
        return self.host.lookup(actor_id)

    @property
    def waits(self) -> WaitGraph:
        return self.host.waits

    def describe_id(self, actor_id: str) -> str | None:
        target = self.host.lookup(actor_id)
        if target is not None:
            return str(target.describe())
        return self.describe_other(actor_id)

    def revoked(
        self, holder: Hashable, reason: str, why: str | None = None
    ) -> asyncio.Future[Any] | None:
        """The broker ended ``holder``'s grant (its group was removed, its node lost: ``why``
        says which): that actor stops, and what it had in flight fails with that reason."""
        target = self.host.lookup(str(holder))
        if target is None or getattr(target, "relocating", False):
            return None  # gone, or moving to another node with a new grant
        if why is not None and getattr(target, "lost_node", "") is None:
            target.lost_node = why  # its calls in flight name the node
        target.ending_because(DeathReason(reason))
        target.kill_nowait()
        died: asyncio.Future[Any] = target.died
        return died

    def ask_deadlocked(self, waiter: Any, target: Any, error: BaseException) -> None:
        """The broker proved that ``waiter``'s wait on ``target`` can never end: end it."""
        if self.host.waits.fail(waiter, target, error):
            return
        known = self._edge_conns.get(waiter)
        if known is not None and not known[0].is_closing():
            known[0].notify(AskDeadlock(waiter, target, error))

