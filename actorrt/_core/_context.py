"""The actor whose code is running now, for parents, wait edges and ``get_context()``."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any, Protocol

from ..resources import GroupTarget


class RunningActor(Protocol):
    """The actor whose code runs now, as parents, wait edges and ``get_context()`` see it
    (an inline actor's cell, or the cell of the actor a worker process hosts)."""

    actor_id: str
    name: str | None
    cls_name: str
    restart_count: int
    max_concurrency: int
    grant_info: tuple[dict[str, float], Any] | None
    loop: asyncio.AbstractEventLoop

    @property
    def parent(self) -> Any:
        """The actor that spawned it (a ``RunningActor`` or a proxy), or ``None``."""
        ...

    @property
    def runtime(self) -> Any:
        """The runtime it runs in."""
        ...

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task that runs its incarnations."""
        ...

    def describe(self) -> str:
        """``Class(id=..., name=...)``."""
        ...

    def serves_in(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` runs this actor's messages (its own task, or a message's task
        when it handles several at once), as opposed to a task its code started."""
        ...


# Set once at the start of each actor incarnation's task; tasks it creates inherit it, so
# their waits are told from the actor's own by ``RunningActor.serves_in``.
current_cell: ContextVar[RunningActor | None] = ContextVar(
    "actorrt_current_actor", default=None
)


# The actor a worker process hosts (its one resource-bearing actor), while it lives. A thread
# its code started (``threading.Thread``, an executor) inherits no context variable, but every
# thread of a worker process other than its loop's runs for that actor: what such a thread
# asks for (a spawn, an ask, a placement group) is that actor's, with its wait edges, its
# capture into the actor's group, and withdrawal at its end.
_hosted: list[RunningActor] = []


def host(actor: RunningActor | None) -> None:
    """Record the actor this worker process hosts (``None``: it ended)."""
    _hosted[:] = [] if actor is None else [actor]


def running_hosted() -> RunningActor | None:
    """The actor this worker process hosts, or ``None``."""
    return _hosted[0] if _hosted else None


def running_actor() -> RunningActor | None:
    """The actor whose code runs now: the context's, or, on a thread of a worker process
    other than its loop's, the actor that process hosts."""
    cell = current_cell.get()
    if cell is not None or not _hosted:
        return cell
    hosted = _hosted[0]
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    return None if loop is hosted.loop else hosted


class BundleRef:
    """One bundle of a placement group, as an actor's ``placement``."""

    def __init__(self, group_id: str, index: int) -> None:
        self.group_id = group_id
        self.index = index

    def target(self) -> GroupTarget:
        return GroupTarget(self.group_id, self.index)

    def __repr__(self) -> str:
        return f"<actorrt.BundleRef group={self.group_id} bundle={self.index}>"


class PlacementInfo:
    """Where an actor's grant sits: its placement group and bundle, if any.

    Attributes:
        group_id: the placement group's id.
        bundle_specs: every bundle of the group, as resource dicts.
        strategy: the group's strategy.
        bundle_index: the bundle this actor draws from.
    """

    __slots__ = ("bundle_index", "bundle_specs", "group_id", "strategy")

    def __init__(
        self,
        group_id: str,
        bundle_specs: list[dict[str, float]],
        strategy: str,
        bundle_index: int | None,
    ) -> None:
        self.group_id = group_id
        self.bundle_specs = bundle_specs
        self.strategy = strategy
        self.bundle_index = bundle_index

    def bundle(self, index: int) -> BundleRef:
        """Bundle ``index`` of the group, as a ``placement`` (also from a worker process)."""
        if not 0 <= index < len(self.bundle_specs):
            raise ValueError(
                f"bundle index {index} is out of range: the group has "
                f"{len(self.bundle_specs)} bundle(s)"
            )
        return BundleRef(self.group_id, index)

    def __reduce__(self) -> tuple[Any, ...]:
        return (PlacementInfo, (self.group_id, self.bundle_specs, self.strategy,
                                self.bundle_index))

    def __repr__(self) -> str:
        return (f"actorrt.PlacementInfo(group_id={self.group_id!r}, "
                f"bundle_specs={self.bundle_specs!r}, bundle_index={self.bundle_index})")


class RuntimeContext:
    """What code can learn about where it runs (``actorrt.get_context()``).

    Attributes:
        actor_id: the id of the actor running this code, or ``None`` in the driver program.
        actor_name: its registered name, or ``None``.
        actor_class: its class name, or ``None``.
        restart_count: how many times it has been restarted.
        assigned_resources: what the actor's grant holds (``{}`` without one).
        placement: its placement group and bundle (``PlacementInfo``), or ``None``.
    """

    __slots__ = (
        "actor_class",
        "actor_id",
        "actor_name",
        "assigned_resources",
        "placement",
        "restart_count",
    )

    def __init__(
        self,
        actor_id: str | None,
        actor_name: str | None,
        actor_class: str | None,
        restart_count: int,
        assigned_resources: dict[str, float] | None = None,
        placement: PlacementInfo | None = None,
    ) -> None:
        self.actor_id = actor_id
        self.actor_name = actor_name
        self.actor_class = actor_class
        self.restart_count = restart_count
        self.assigned_resources = assigned_resources or {}
        self.placement = placement

    def get_actor_id(self) -> str | None:
        """The id of the current actor (Ray's spelling)."""
        return self.actor_id

    def get_assigned_resources(self) -> dict[str, float]:
        """What the current actor's grant holds (Ray's spelling)."""
        return dict(self.assigned_resources)

    def __repr__(self) -> str:
        fields: dict[str, Any] = {
            "actor_id": self.actor_id,
            "actor_name": self.actor_name,
            "actor_class": self.actor_class,
            "restart_count": self.restart_count,
            "assigned_resources": self.assigned_resources,
            "placement": self.placement,
        }
        inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"actorrt.RuntimeContext({inner})"


def get_context() -> RuntimeContext:
    """Describe the actor whose code calls this (or the driver program); on a thread that a
    worker-process actor's code started, that actor."""
    cell = running_actor()
    if cell is None:
        return RuntimeContext(None, None, None, 0)
    assigned, placement = cell.grant_info or ({}, None)
    return RuntimeContext(
        cell.actor_id, cell.name, cell.cls_name, cell.restart_count, assigned, placement
    )
