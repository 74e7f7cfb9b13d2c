"""The interface a runtime's role implements, and what a role may ask of its runtime."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .._core._placement_group import PlacementService
from .._core._ref import ActorRef
from .._core._spawn_progress import tracked
from .._core._waits import WaitGraph
from .._processes._services import WorkerRequests
from ..resources import PendingRequest

if TYPE_CHECKING:
    from .._core._actor import ActorClass
    from .._processes._router import Workers
    from .._processes._scheduler import Scheduler

A = TypeVar("A")


@dataclasses.dataclass(frozen=True, slots=True)
class SpawnRequest(Generic[A]):
    """One spawn, as the runtime hands it to its role.

    Attributes:
        actor_class: what to start, with its options.
        args, kwargs: the constructor's arguments.
        parent: the actor it will be a child of (a cell or a process actor), or ``None``.
        requester: the actor that awaits the spawn when it is not ``parent`` itself (an
            inline actor inside ``parent``'s worker process, which the broker knows as a
            child of ``parent``).
        bounded: the caller bounds its wait (``spawn_timeout``, ``asyncio.wait_for``): it
            ends by itself, so it is no wait edge.
    """

    actor_class: ActorClass[A]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    parent: Any = None
    requester: str | None = None
    bounded: bool = False


class ResourceViews(Protocol):
    """``actorrt.cluster_resources()``, ``available_resources()``, ``pending_requests()``."""

    def cluster(self) -> dict[str, float]: ...

    def available(self) -> dict[str, float]: ...

    def pending(self) -> list[PendingRequest]: ...


class OwnerSide(WorkerRequests, Protocol):
    """What the runtime that owns worker processes serves them (over their connections)."""

    @property
    def scheduler(self) -> Scheduler: ...


class Role(Protocol):
    """What a runtime delegates to its role (see the package docstring)."""

    @property
    def placement(self) -> PlacementService:
        """Placement groups: reserved, awaited and removed where this role keeps them."""

    @property
    def resources(self) -> ResourceViews:
        """The cluster's resource views (a worker process has none: it raises)."""

    @property
    def owner(self) -> OwnerSide:
        """The side that serves worker processes (a worker process has none: it raises)."""

    async def start(self) -> None:
        """Called once the runtime is entered (its loop is known)."""

    async def close(self) -> None:
        """Called last in the runtime's shutdown, after every actor ended."""

    async def spawn(self, request: SpawnRequest[A]) -> ActorRef[A]:
        """Start an actor that needs a resource grant or a worker process."""

    def registered(self, actor_id: str, parent_id: str) -> None:
        """A new actor of this runtime has ``parent_id`` as its parent (for the broker)."""

    def ended(self, actor_id: str) -> None:
        """An actor of this runtime ended: what it held comes back."""

    def children_ending(self, parent: Any) -> None:
        """``parent``'s children are being ended: withdraw the spawns it waits for."""

    async def get_actor(self, name: str, known: list[str]) -> ActorRef[Any]:
        """The actor named ``name``, which this runtime does not run (``known``: the names
        it does run, for the error)."""

    def describe_other(self, actor_id: str) -> str | None:
        """How to name an actor id that is not one of this runtime's live actors."""

    def spawning(self) -> dict[str, tuple[str, str | None, str | None]]:
        """Spawns that wait for resources: actor id -> (class name, name, parent id)."""


class RuntimeHost(Protocol):
    """What a role may ask of the runtime it serves."""

    runtime_id: str
    waits: WaitGraph

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def workers(self) -> Workers: ...

    def lookup(self, actor_id: str) -> Any: ...

    def actors(self) -> Mapping[str, Any]: ...

    def new_id(self) -> str: ...

    async def start(self, cell: Any) -> ActorRef[Any]: ...

    async def spawn_child(self, request: SpawnRequest[A]) -> ActorRef[A]: ...

    def may_start_child_of(self, parent: Any, what: str) -> None:
        """Raise if ``parent`` ended or is ending (a child never outlives its parent)."""

    def parent_gone(self, parent: Any, what: str) -> BaseException:
        """The error for a ``what`` that ``parent``, ended or ending, was spawning."""


async def within_spawn_timeout(
    request: SpawnRequest[A], start: Callable[[SpawnRequest[A]], Awaitable[ActorRef[A]]]
) -> ActorRef[A]:
    """``start(request)``, bounded by the class's ``spawn_timeout`` option when it has one
    (the request it then starts is marked bounded)."""
    actor_class = request.actor_class
    options = actor_class.actor_options
    timeout = options.spawn_timeout
    if timeout is None:
        return await start(request)
    # The task wait_for starts (and every task it starts) sees this spawn's progress.
    with tracked() as progress:
        starting = start(dataclasses.replace(request, bounded=True))
        try:
            return await asyncio.wait_for(starting, timeout)
        except TimeoutError:
            name = f" name={options.name!r}" if options.name else ""
            raise TimeoutError(
                f"spawning {actor_class.cls.__name__}({name.strip()}) did not finish within "
                f"spawn_timeout={timeout} s: it was waiting for {progress.step}. Its "
                "resource request was withdrawn and nothing of it was kept"
            ) from None
