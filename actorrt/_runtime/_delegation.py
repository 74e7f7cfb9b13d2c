"""What a runtime delegates to its role, as methods of the runtime (see ``actorrt._roles``).

Mixed into :class:`~actorrt._runtime._root.Runtime`: the placement service, resource views and the
owner side come from the role the runtime built when it was entered, with no branch on
where it runs.
"""

from __future__ import annotations

from .._core._placement_group import PlacementService
from .._processes._scheduler import Scheduler
from .._roles._role import OwnerSide, ResourceViews, Role
from ..resources import Broker, PendingRequest


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
