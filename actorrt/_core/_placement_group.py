"""Placement groups: atomic reservations of resource bundles (docs/broker.md).

``actorrt.placement_group(bundles, strategy)`` submits the reservation at once; it is all or
nothing. ``await pg.ready(timeout)`` waits for it; cancelling that wait, or a timeout,
withdraws the reservation. Actors go into the group with ``placement=pg`` (any bundle with
room) or ``placement=pg.bundle(i)``; ``await pg.remove()`` gives the bundles back and stops
the actors placed in them. The group's holder is the actor that called
``placement_group()`` (its end removes the group), or the driver program.

A handle keeps no bookkeeping of its own beyond its id and bundles: it talks to a
:class:`PlacementService`, which the running runtime's role provides (the scheduler that
owns the broker, in the driver program; the connection to the owning runtime, in a worker
process). The broker holds the one record of each group.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from .._errors import ResourceError
from ..resources import GroupTarget, Resources, parse_bundles, parse_strategy
from ._context import BundleRef as BundleRef
from ._context import PlacementInfo, running_actor
from ._current import RuntimeServices, current_services

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

__all__ = ["BundleRef", "PlacementGroup", "PlacementService", "placement_group"]


class PlacementService(Protocol):
    """Where placement groups are reserved, awaited and removed (a runtime role)."""

    @property
    def reserve_grants(self) -> bool:
        """Whether the future :meth:`reserve` returns is the grant itself (done: reserved),
        rather than the owner's acceptance (a worker's)."""
        ...

    def reserve(
        self, bundles: tuple[Resources, ...], strategy: str, holder: str | None
    ) -> tuple[str, asyncio.Future[Any], str]:
        """Submit a reservation held by ``holder`` (an actor id here, or ``None``: the
        program). Returns the group's id, a future done once the reservation was accepted
        (in a worker) or granted (in the driver), and the holder as the broker knows it.
        Raises at once when it is infeasible."""
        ...

    async def ready(
        self, group_id: str, accepted: asyncio.Future[Any], requester: str | None
    ) -> None:
        """Wait until the group is reserved (at once when it already is); ``requester`` (an
        actor id, or ``None`` for a bounded wait) is blocked on it meanwhile (for the
        deadlock check). ``accepted`` is the future :meth:`reserve` returned."""
        ...

    def withdraw(self, group_id: str) -> None:
        """Withdraw the reservation now, without waiting (a cancelled wait)."""
        ...

    async def remove(self, group_id: str) -> None:
        """Give the group back and wait until the actors placed in it have stopped."""
        ...

    def describe(self, group_id: str, bundle_index: int | None) -> PlacementInfo | None:
        """What an actor placed in bundle ``bundle_index`` of the group may learn of it."""
        ...


class HasPlacement(Protocol):
    """A runtime that provides placement groups."""

    @property
    def placement(self) -> PlacementService: ...


class PlacementGroup:
    """A reservation of bundles; use it (or ``pg.bundle(i)``) as an actor's ``placement``."""

    def __init__(
        self,
        runtime: RuntimeServices,
        service: PlacementService,
        group_id: str,
        bundles: tuple[Resources, ...],
        strategy: str,
        future: asyncio.Future[Any],
        holder: str,
    ) -> None:
        self._runtime = runtime
        self._service = service
        self.id = group_id
        self._bundles = bundles
        self.strategy = strategy
        self._future = future
        self._holder = holder
        self._removed = False
        # A bounded ready() that timed out leaves its wait running here, so the group keeps
        # its place in the queue and a later ready() picks the same wait up.
        self._timed_wait: asyncio.Future[Any] | None = None

    @property
    def bundle_specs(self) -> list[dict[str, float]]:
        """The bundles, as resource dicts."""
        return [bundle.to_dict() for bundle in self._bundles]

    @property
    def bundle_count(self) -> int:
        return len(self._bundles)

    def bundle(self, index: int) -> BundleRef:
        """Bundle ``index`` of this group, as a ``placement``."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"a bundle index is an int, got {index!r}")
        if not 0 <= index < len(self._bundles):
            raise ValueError(
                f"bundle index {index} is out of range: the group has "
                f"{len(self._bundles)} bundle(s), 0..{len(self._bundles) - 1}"
            )
        return BundleRef(self.id, index)

    def target(self) -> GroupTarget:
        return GroupTarget(self.id, None)

    def is_ready(self) -> bool:
        return self._future.done() and not self._future.cancelled() and (
            self._future.exception() is None
        )

    async def ready(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (Ray's API)
        """Wait until every bundle is reserved.

        Raises ``TimeoutError`` after ``timeout`` seconds; as in Ray (``ray.get(pg.ready(),
        timeout=...)``), the group is not removed then: it keeps waiting in the queue, a later
        ``ready()`` waits on, and ``remove()`` withdraws it. A cancelled wait withdraws the
        reservation. Raises ``ResourceDeadlockError`` when the wait can only end once its
        holder ends (a bounded wait never counts so). A ``timeout`` that is negative, NaN or
        infinite is a ``ValueError`` (``None`` waits without a limit).
        """
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise TypeError(
                    f"PlacementGroup.ready(timeout=...) must be a number of seconds or None, "
                    f"got {timeout!r}"
                )
            if not math.isfinite(timeout) or timeout < 0:
                raise ValueError(
                    f"PlacementGroup.ready(timeout=...) must be >= 0 and finite (seconds), or "
                    f"None to wait without a limit; got {timeout!r}"
                )
        if self._removed:
            raise ResourceError(f"placement group {self.id} was removed")
        future = self._future
        if (
            future.done()
            and self._service.reserve_grants
            and not future.cancelled()
            and future.exception() is None
        ):
            return  # reserved at once: nothing to wait for
        runtime = self._runtime
        if asyncio.get_running_loop() is not runtime.loop:
            await runtime.call_on_loop(self.ready(timeout))
            return
        try:
            if timeout is None:
                await self._service.ready(self.id, future, _requester())
            else:
                await asyncio.wait_for(asyncio.shield(self._bounded_wait()), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"placement group {self.id} ({self.bundle_specs}, {self.strategy}) was not "
                f"ready within {timeout} s; it is still queued: await pg.ready() again, or "
                "pg.remove() to withdraw it (actorrt.pending_requests() says what it waits for)"
            ) from None
        except asyncio.CancelledError:
            self._removed = True
            self._service.withdraw(self.id)  # a no-op if the wait already withdrew it
            raise

    def _bounded_wait(self) -> asyncio.Future[Any]:
        """The wait of bounded ``ready()`` calls, shared by them and outliving a timeout (it
        is no wait edge: a bounded wait ends by itself)."""
        wait = self._timed_wait
        if wait is None or wait.done():
            wait = asyncio.ensure_future(self._service.ready(self.id, self._future, None))
            wait.add_done_callback(_retrieved)
            self._timed_wait = wait
        return wait

    async def remove(self) -> None:
        """Give the bundles back; actors placed in the group are stopped."""
        if asyncio.get_running_loop() is not self._runtime.loop:
            await self._runtime.call_on_loop(self.remove())
            return
        if self._removed:
            return
        self._removed = True
        await self._service.remove(self.id)

    def __repr__(self) -> str:
        state = "removed" if self._removed else ("ready" if self.is_ready() else "pending")
        return f"<actorrt.PlacementGroup {self.id} {self.bundle_specs} {self.strategy} {state}>"


def _retrieved(wait: asyncio.Future[Any]) -> None:
    """Whoever awaited the wait has its outcome; nobody may be left to (a timed-out caller
    that never asks again), so it is marked as seen."""
    if not wait.cancelled():
        wait.exception()


def _requester() -> str | None:
    cell = running_actor()
    return cell.actor_id if cell is not None else None


_PARSED: dict[Any, tuple[Resources, ...]] = {}


def _parsed(bundles: Sequence[Mapping[str, Any]]) -> tuple[Resources, ...]:
    """``parse_bundles``, remembered for the bundle lists a program keeps asking for."""
    try:
        key = tuple(tuple(b.items()) for b in bundles)
        hit = _PARSED.get(key)
    except (AttributeError, TypeError):  # not dicts, or unhashable amounts: parse says why
        return parse_bundles(bundles)
    if hit is None:
        hit = parse_bundles(bundles)
        if len(_PARSED) < 1024:
            _PARSED[key] = hit
    return hit


def placement_group(
    bundles: Sequence[Mapping[str, Any]], strategy: str = "PACK"
) -> PlacementGroup:
    """Reserve ``bundles`` atomically with ``strategy`` (``PACK``, ``SPREAD``,
    ``STRICT_PACK``, ``STRICT_SPREAD``); returns at once, ``await pg.ready()`` waits.

    Raises at this call: ``ValueError``/``TypeError`` for bad bundles or strategy,
    ``InfeasibleResourceError`` when the cluster can never hold them. Called inside a
    placement group it is never captured: it goes to the cluster.
    """
    parsed = _parsed(bundles)
    chosen = str(parse_strategy(strategy))
    runtime = current_services()
    service = cast(HasPlacement, runtime).placement
    cell = running_actor()
    holder = cell.actor_id if cell is not None and cell.runtime is runtime else None
    loop = runtime.loop
    if _running_loop() is not loop:
        # From another thread (the sync facade's caller): reserve on the runtime's loop.
        async def on_loop() -> tuple[str, asyncio.Future[Any], str]:
            return service.reserve(parsed, chosen, holder)

        group_id, future, owner = asyncio.run_coroutine_threadsafe(on_loop(), loop).result()
    else:
        group_id, future, owner = service.reserve(parsed, chosen, holder)
    return PlacementGroup(runtime, service, group_id, parsed, chosen, future, owner)
