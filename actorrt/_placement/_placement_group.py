"""Placement groups: atomic reservations of resource bundles (docs/broker.md).

``actorrt.placement_group(bundles, strategy)`` submits the reservation at once; it is all or
nothing. ``await pg.ready(timeout)`` waits for it; cancelling that wait, or a timeout,
withdraws the reservation. Actors go into the group with ``placement=pg`` (any bundle with
room) or ``placement=pg.bundle(i)``; ``await pg.remove()`` gives the bundles back and stops
the actors placed in them. The group's holder is the actor that called
``placement_group()`` (its end removes the group), or the driver program.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._core._context import current_cell
from .._core._current import current_services
from .._core._waits import bounded_by_awaiter
from .._errors import ResourceError
from .._wire._messages import GroupReady, GroupRemove
from ..resources import GroupTarget, Resources, parse_bundles, parse_strategy

if TYPE_CHECKING:
    from .._runtime import Runtime


class PlacementGroup:
    """A reservation of bundles; use it (or ``pg.bundle(i)``) as an actor's ``placement``."""

    def __init__(
        self,
        runtime: Runtime,
        group_id: str,
        bundles: tuple[Resources, ...],
        strategy: str,
        future: asyncio.Future[Any],
        holder: str,
    ) -> None:
        self._runtime = runtime
        self.id = group_id
        self._bundles = bundles
        self.strategy = strategy
        self._future = future
        self._holder = holder
        self._removed = False

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

        Raises ``TimeoutError`` after ``timeout`` seconds; a timeout or a cancelled wait
        withdraws the reservation. Raises ``ResourceDeadlockError`` when the wait can only
        end once its holder ends. A ``timeout`` that is negative, NaN or infinite is a
        ``ValueError`` (``None`` waits without a limit).
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
        if self._owner_conn() is not None:
            await self._ready_via_owner(timeout)
            return
        future = self._future
        if future.done() and not future.cancelled() and future.exception() is None:
            return  # reserved at once: nothing to wait for
        runtime = self._runtime
        if asyncio.get_running_loop() is not runtime.loop:
            await runtime.call_on_loop(self.ready(timeout))
            return
        requester = _requester() if timeout is None else None  # a timed wait ends by itself
        try:
            await asyncio.wait_for(
                runtime.grants.wait(self.id, self._future, requester), timeout
            )
        except TimeoutError:
            await self.remove()
            raise TimeoutError(
                f"placement group {self.id} ({self.bundle_specs}, {self.strategy}) was not "
                f"ready within {timeout} s and was withdrawn; actorrt.pending_requests() says "
                "what it waited for"
            ) from None
        except asyncio.CancelledError:
            self._removed = True
            runtime.grants.cancel(self.id)  # withdrawn (a no-op if the wait already did it)
            runtime.forget_group(self.id)
            raise

    def _owner_conn(self) -> Any:
        workers = self._runtime._workers
        return workers.head if workers is not None else None

    async def _ready_via_owner(self, timeout: float | None) -> None:  # noqa: ASYNC109
        """In a worker: the owning runtime holds the group; wait there, as this actor."""
        head = self._owner_conn()
        try:
            await self._future  # accepted by the owner (or infeasible: raised here)
            # A wait with a timeout ends by itself: it is no blocking edge (docs/broker.md).
            bounded = timeout is not None or bounded_by_awaiter()
            requester = None if bounded else _requester()
            await asyncio.wait_for(head.request(GroupReady(self.id, requester)), timeout)
        except TimeoutError:
            await self.remove()
            raise TimeoutError(
                f"placement group {self.id} was not ready within {timeout} s and was withdrawn"
            ) from None
        except asyncio.CancelledError:
            self._removed = True
            head.notify(GroupRemove(self.id))
            raise

    async def remove(self) -> None:
        """Give the bundles back; actors placed in the group are stopped."""
        runtime = self._runtime
        head = self._owner_conn()
        if head is not None:
            if not self._removed:
                self._removed = True
                await head.request(GroupRemove(self.id))
            return
        if asyncio.get_running_loop() is not runtime.loop:
            await runtime.call_on_loop(self.remove())
            return
        if self._removed:
            return
        self._removed = True
        runtime.grants.cancel(self.id)
        runtime.forget_group(self.id)
        await runtime.wait_revoked(self.id)

    def __repr__(self) -> str:
        state = "removed" if self._removed else ("ready" if self.is_ready() else "pending")
        return f"<actorrt.PlacementGroup {self.id} {self.bundle_specs} {self.strategy} {state}>"


class BundleRef:
    """One bundle of a placement group, as an actor's ``placement``."""

    def __init__(self, group_id: str, index: int) -> None:
        self.group_id = group_id
        self.index = index

    def target(self) -> GroupTarget:
        return GroupTarget(self.group_id, self.index)

    def __repr__(self) -> str:
        return f"<actorrt.BundleRef group={self.group_id} bundle={self.index}>"


def _requester() -> str | None:
    cell = current_cell.get()
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
    chosen = parse_strategy(strategy)
    runtime: Any = current_services()
    cell = current_cell.get()
    holder = cell.actor_id if cell is not None and cell.runtime is runtime else None
    group: PlacementGroup = runtime.reserve_group(parsed, str(chosen), holder)
    return group
