"""What the broker takes and gives: placement targets, output events, pending-request reports.

Every input method of :class:`~actorrt.resources.Broker` that can change who holds what returns
a list of the events it caused, in the order they happened:

- :class:`Granted`: a request got its resources (which node, which bundle, which GPU devices);
- :class:`Failed`: a waiting request will never be granted (deadlock victim, group removed,
  no node left that could hold it);
- :class:`Revoked`: a grant ended because its placement group was removed or its node lost;
- :class:`Stalled`: a request has waited a while with no progress in its queue (a warning);
- :class:`AskDeadlocked`: an ask between actors closes a cycle of waits and fails.

Events are named tuples: cheap to build, immutable, and easy to match on.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

from actorrt._errors import DeadlockError, ResourceError

from ._spec import Resources

__all__ = [
    "AskDeadlocked",
    "BundlePlacement",
    "Event",
    "Failed",
    "Granted",
    "GroupInfo",
    "GroupTarget",
    "PendingRequest",
    "Revoked",
    "Stalled",
]


class GroupTarget(NamedTuple):
    """Place a request inside a reserved placement group.

    Attributes:
        group: the group's id (the request id of its reservation).
        bundle: a bundle index, or ``None`` for any bundle with room (lowest index first).
    """

    group: Hashable
    bundle: int | None = None


class BundlePlacement(NamedTuple):
    """Where one bundle (or one plain request) was placed.

    Attributes:
        node_id: the node it sits on.
        resources: what it holds.
        gpus: ``(device id, fraction of that device)`` per GPU device it uses.
        group: for a grant inside a placement group, that group's id; else ``None``.
        bundle_index: for a grant inside a group, the bundle it draws from; for a bundle of a
            group reservation, that bundle's index; else ``None``.
    """

    node_id: Hashable
    resources: Resources
    gpus: tuple[tuple[str, float], ...]
    group: Hashable | None
    bundle_index: int | None

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """The device ids, for ``CUDA_VISIBLE_DEVICES`` (comma-join them)."""
        return tuple(device for device, _ in self.gpus)


class Granted(NamedTuple):
    """A request was granted.

    Attributes:
        request_id: the request.
        holder: the holder of the grant (whose ``release`` gives it back).
        placements: one per bundle for a group reservation (in bundle order), else one.
        group: for a group reservation, the new group's id (equal to ``request_id``).
    """

    request_id: Hashable
    holder: Hashable
    placements: tuple[BundlePlacement, ...]
    group: Hashable | None

    @property
    def placement(self) -> BundlePlacement:
        """The first (for a plain request, the only) placement."""
        return self.placements[0]


class GroupInfo(NamedTuple):
    """A reserved placement group, as the broker keeps it (one record per group, dropped when
    the group is removed or its holder ends).

    Attributes:
        group: the group's id.
        holder: who holds it (whose end removes it).
        bundles: its bundles, as resource dicts.
        strategy: its strategy name.
        nodes: the node of each bundle.
    """

    group: Hashable
    holder: Hashable
    bundles: tuple[dict[str, float], ...]
    strategy: str
    nodes: tuple[Hashable, ...]


class Failed(NamedTuple):
    """A waiting request failed and was withdrawn.

    Attributes:
        request_id: the request.
        holder: its holder.
        error: ``ResourceDeadlockError``, or ``ResourceError`` when its group was removed.
    """

    request_id: Hashable
    holder: Hashable
    error: ResourceError


class Revoked(NamedTuple):
    """A grant ended without its holder giving it back: its placement group was removed, or
    the node it sat on was lost.

    Attributes:
        request_id: the request whose grant ended.
        holder: its holder (the actor layer stops it: docs/broker.md, ``pg.remove()``).
        group: the removed group, or ``None`` for a grant outside any group (a lost node).
            ``request_id == group`` when the group reservation itself ended (a bundle of it
            was on a lost node).
        node: the lost node, or ``None`` when the group was removed.
    """

    request_id: Hashable
    holder: Hashable
    group: Hashable | None
    node: Hashable | None = None


class Stalled(NamedTuple):
    """A request has waited ``stall_after`` seconds with no grant in its queue (a warning).

    Reported once per request per period without progress; ``reason`` explains what it waits on.
    ``blocked_holder``: a holder of what it is short of that is itself waiting (on a request
    or an ask), when nobody awaits the request from inside an actor: it may be waiting for
    what only this request's holder would give.
    """

    request_id: Hashable
    holder: Hashable
    reason: str
    blocked_holder: Hashable | None = None


class DeadlockReport(NamedTuple):
    """A deadlock the broker found and broke, kept for views (the last few; see
    ``Broker.deadlock_reports``).

    ``kind``: ``"resources"`` (``waiter``'s request failed: what it waits for is held by
    ``involved``, which wait on it in turn; ``parent``: the waiter's parent, the spawner
    that awaits it) or ``"asks"`` (``involved`` is the cycle of asks, ``waiter`` first).
    ``at``: the broker's ``now`` then.
    """

    at: float
    kind: str
    waiter: Hashable
    involved: tuple[Hashable, ...]
    message: str
    parent: Hashable | None = None


class AskDeadlocked(NamedTuple):
    """``waiter`` awaits an answer from ``target`` that can never come: the asks form a
    cycle of actors that each serve one message at a time. The broker has dropped the edge;
    the actor layer fails that wait with ``error``.
    """

    waiter: Hashable
    target: Hashable
    error: DeadlockError


Event = Granted | Failed | Revoked | Stalled | AskDeadlocked


class PendingRequest(NamedTuple):
    """A waiting request, explained (what ``actorrt.pending_requests()`` lists).

    Attributes:
        request_id: the request.
        holder: its holder.
        bundles: what it asks for, one dict per bundle (one for a plain request).
        strategy: the group strategy for a group reservation, else ``None``.
        queue: ``"cluster"``, or the id of the group it waits in.
        waited_s: seconds since it was made.
        short_of: what it lacks where it comes closest to fitting (float amounts).
        held_by: holders of what it is short of there (at most a few).
        reserved: it holds a reservation (it is among the oldest waiting requests).
        behind: older requests whose reservations are what keeps it waiting.
        stalled: no progress in its queue for ``stall_after`` seconds.
        reason: all of the above, in one sentence.
    """

    request_id: Hashable
    holder: Hashable
    bundles: tuple[dict[str, float], ...]
    strategy: str | None
    queue: Hashable
    waited_s: float
    short_of: dict[str, float]
    held_by: tuple[Hashable, ...]
    reserved: bool
    behind: tuple[Hashable, ...]
    stalled: bool
    reason: str
