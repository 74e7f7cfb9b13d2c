"""What a runtime delegates to its role, as methods of the runtime (see ``actorrt._roles``).

Mixed into :class:`~actorrt._runtime.Runtime`: the placement service, resource views and the
owner side come from the role the runtime built when it was entered, with no branch on
where it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core._placement_group import PlacementService
from ._core._ref import ActorRef
from ._placement._scheduler import Scheduler
from ._roles._role import OwnerSide, ResourceViews, Role
from .resources import Broker, PendingRequest

if TYPE_CHECKING:
    from ._core._actor import ActorClass


class RoleDelegation:
    """The runtime's role-dependent calls, delegated to ``self._role``."""

    _role_: Role | None

    @property
    def _role(self) -> Role:
        if self._role_ is None:
            raise RuntimeError("this Runtime has not been entered with `async with`")
        return self._role_

    # --------------------------------------------------- what the role provides

    @property
    def placement(self) -> PlacementService:
        """Where this runtime's placement groups are reserved (its role)."""
        return self._role.placement

    @property
    def resource_views(self) -> ResourceViews:
        """``cluster_resources()`` and the others (raises in a worker process)."""
        return self._role.resources

    @property
    def owner(self) -> OwnerSide:
        """The side that serves worker processes (raises in a worker process)."""
        return self._role.owner

    @property
    def grants(self) -> Scheduler:
        """The bridge to the resource broker (the driver's; made when it is entered)."""
        return self._role.owner.scheduler

    @property
    def broker(self) -> Broker:
        """The resource broker, to read (the driver's)."""
        return self._role.owner.scheduler.broker

    def cluster_resources(self) -> dict[str, float]:
        return self._role.resources.cluster()

    def available_resources(self) -> dict[str, float]:
        return self._role.resources.available()

    def pending_requests(self) -> list[PendingRequest]:
        return self._role.resources.pending()

    # What worker processes ask of their owner (actorrt._placement._dispatch).

    async def spawn_for_worker(
        self,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        chain: list[tuple[str, str]] | None,
        bounded: bool = False,
    ) -> ActorRef[Any]:
        return await self.owner.spawn_for_worker(actor_class, args, kwargs, chain, bounded)

    async def reserve_for_worker(
        self, group_id: str, specs: list[dict[str, float]], strategy: str, holder: str | None
    ) -> None:
        await self.owner.reserve_for_worker(group_id, specs, strategy, holder)

    async def ready_for_worker(self, group_id: str, requester: str | None) -> None:
        await self.owner.ready_for_worker(group_id, requester)

    async def remove_for_worker(self, group_id: str) -> None:
        await self.owner.remove_for_worker(group_id)

    def edge_reported(self, waiter: Any, target: Any, conn: Any, added: bool) -> None:
        self.owner.edge_reported(waiter, target, conn, added)
