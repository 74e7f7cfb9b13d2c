"""The worker role: a worker process's runtime, which owns no resources.

Everything that needs the broker or a worker process goes to the owning runtime over the
worker's connection (``runtime.workers.head``, attached by the worker's main once it has
connected): spawns of actors with resources or a process, placement groups, names this
process does not run. Resource views are read in the driver program, not here.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from .._core._context import PlacementInfo
from .._core._ref import ActorRef
from .._core._waits import bounded_by_awaiter
from .._processes._scheduler import DRIVER
from .._wire._connection import Connection
from .._wire._messages import GroupReady, GroupRemove, ReserveGroup
from ..resources import Resources
from ._role import OwnerSide, ResourceViews, RuntimeHost, SpawnRequest

if TYPE_CHECKING:
    pass

A = TypeVar("A")


class WorkerRole:
    """The role of a worker process's runtime (see the module docstring)."""

    def __init__(self, host: RuntimeHost) -> None:
        self.host = host
        self._ids = itertools.count(1)

    @property
    def _head(self) -> Connection:
        head = self.host.workers.head
        if head is None:
            raise RuntimeError("this worker is not connected to its owning runtime yet")
        return head

    # ------------------------------------------------------------ the Role interface

    @property
    def placement(self) -> WorkerRole:
        return self

    @property
    def resources(self) -> ResourceViews:
        raise RuntimeError(
            "resource views are read in the driver program (the owning runtime), not in a "
            "worker process; pass what an actor needs in a message"
        )

    @property
    def owner(self) -> OwnerSide:
        _not_an_owner()

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def spawn(self, request: SpawnRequest[A]) -> ActorRef[A]:
        # The owning runtime grants it and applies the spawn_timeout option, if any.
        ref: ActorRef[A] = await self.host.workers.spawn_via_owner(
            request.actor_class, request.args, request.kwargs
        )
        return ref

    def registered(self, actor_id: str, parent_id: str) -> None:
        return None  # the owner learns of inline actors when they spawn through it

    def ended(self, actor_id: str) -> None:
        return None  # what the actors here hold is held, and given back, by the owner

    def children_ending(self, parent: Any) -> None:
        return None  # the owner withdraws the spawns of its own actors

    async def get_actor(self, name: str, known: list[str]) -> ActorRef[Any]:
        return await self.host.workers.get_actor_via_owner(name)

    def describe_other(self, actor_id: str) -> str | None:
        return None

    def spawning(self) -> dict[str, tuple[str, str | None, str | None]]:
        return {}

    # ---------------------------------------------- placement groups (PlacementService)

    reserve_grants = False  # the future reserve() returns is the owner's acceptance

    def reserve(
        self, bundles: tuple[Resources, ...], strategy: str, holder: str | None
    ) -> tuple[str, asyncio.Future[Any], str]:
        """The owning runtime reserves the group, held by this worker's actor (so the group
        goes when that actor ends)."""
        cell = self.host.lookup(holder) if holder is not None else None
        while cell is not None and cell.parent is not None:
            cell = cell.parent  # the actor the owner placed here, which it knows
        owner = cell.actor_id if cell is not None else None
        group_id = f"{self.host.runtime_id}-g{next(self._ids)}"
        specs = [bundle.to_dict() for bundle in bundles]
        accepted = self._head.request(ReserveGroup(group_id, specs, strategy, owner))
        return group_id, accepted, owner or DRIVER

    async def ready(
        self, group_id: str, accepted: asyncio.Future[Any], requester: str | None
    ) -> None:
        await accepted  # accepted by the owner (or infeasible: raised here)
        if requester is not None and bounded_by_awaiter():
            requester = None  # a wait bounded by asyncio.wait_for ends by itself: no edge
        await self._head.request(GroupReady(group_id, requester))

    def withdraw(self, group_id: str) -> None:
        head = self.host.workers.head
        if head is not None and not head.is_closing():
            head.notify(GroupRemove(group_id))

    async def remove(self, group_id: str) -> None:
        await self._head.request(GroupRemove(group_id))

    def describe(self, group_id: str, bundle_index: int | None) -> PlacementInfo | None:
        return None  # an actor here learns of its group from the owner, at its start


def _not_an_owner() -> NoReturn:
    raise RuntimeError("a worker process owns no worker processes and serves none")


__all__ = ["WorkerRole"]
