"""The broker's internal records: requests, grants, groups, holders.

Plain slotted classes (for speed: one of each per spawn, on the hot path). They carry no logic
beyond small accessors; the broker and its helper modules change them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from ._placement import Shape
from ._pool import Allocation, ResourcePool
from ._spec import Resources

__all__ = ["DONE", "GRANTED", "WAITING", "Grant", "Group", "Holder", "Request", "WaitQueue"]

WAITING = 0
GRANTED = 1
DONE = 2


class Request:
    """A request from arrival until it is granted, failed or withdrawn.

    ``key`` orders the cluster queue: the admission key of the oldest grant held by the holder
    or an ancestor, else the request's own arrival number ``seq``.
    """

    # Slots for speed: one per spawn.
    __slots__ = (
        "arrival",
        "bundle",
        "group",
        "holder",
        "is_group",
        "key",
        "plan",
        "rid",
        "seq",
        "shape",
        "status",
        "waiters",
    )

    def __init__(
        self,
        rid: Hashable,
        holder: Hashable,
        shape: Shape,
        *,
        is_group: bool,
        group: Group | None,
        bundle: int | None,
        key: int,
        seq: int,
        arrival: float,
    ) -> None:
        self.rid = rid
        self.holder = holder
        self.shape = shape
        self.is_group = is_group
        self.group = group
        self.bundle = bundle
        self.key = key
        self.seq = seq
        self.arrival = arrival
        self.status = WAITING
        self.plan: list[int] | None = None
        self.waiters: set[Hashable] = set()

    def __repr__(self) -> str:
        return f"Request({self.rid!r}, holder={self.holder!r}, {self.shape})"


class Grant:
    """What a holder holds through one granted request.

    ``placed`` holds ``(pool index, allocation)`` per bundle: node indices for a cluster grant,
    bundle indices of ``group`` for a grant inside a group. ``owned`` is the group a group
    reservation created.
    """

    # Slots for speed: one per spawn.
    __slots__ = ("group", "holder", "key", "owned", "placed", "rid", "shape")

    def __init__(
        self,
        rid: Hashable,
        holder: Hashable,
        key: int,
        shape: Shape,
        placed: list[tuple[int, Allocation]],
        group: Group | None,
    ) -> None:
        self.rid = rid
        self.holder = holder
        self.key = key
        self.shape = shape
        self.placed = placed
        self.group = group
        self.owned: Group | None = None


class WaitQueue:
    """Arrival bookkeeping shared by the cluster queue and group queues (for stall reports)."""

    __slots__ = ("arrivals", "last_progress", "stall_reported")

    def __init__(self, now: float) -> None:
        self.arrivals: deque[Request] = deque()
        self.last_progress = now
        self.stall_reported = False

    def oldest_waiting(self) -> Request | None:
        """The earliest-arrived request still waiting (lazy deletion keeps this amortised O(1))."""
        arrivals = self.arrivals
        while arrivals and arrivals[0].status != WAITING:
            arrivals.popleft()
        return arrivals[0] if arrivals else None

    def progressed(self, now: float) -> None:
        """Record a grant: the stall clock restarts."""
        self.last_progress = now
        self.stall_reported = False


class Group:
    """A reserved placement group: one sub-pool per bundle, and requests placed inside it.

    The bundle pools are built on first use: a group that is reserved and released without
    anything placed in it (the common benchmark case) never pays for them.
    """

    # Slots for speed: one per trial.
    __slots__ = ("_nodes", "_pools", "bundles", "gid", "grant", "members", "queue", "waits")

    def __init__(
        self,
        gid: Hashable,
        grant: Grant,
        bundles: tuple[Resources, ...],
        nodes: Sequence[ResourcePool],
        now: float,
    ) -> None:
        self.gid = gid
        self.grant = grant
        self.bundles = bundles
        self._nodes = nodes
        self._pools: list[ResourcePool] | None = None
        self.members: dict[Hashable, Grant] = {}
        self.queue: dict[Hashable, Request] = {}
        self.waits = WaitQueue(now)

    @property
    def pools(self) -> list[ResourcePool]:
        """One sub-pool per bundle, holding exactly what the bundle reserved."""
        pools = self._pools
        if pools is None:
            nodes = self._nodes
            pools = self._pools = [nodes[i].sub_pool(alloc) for i, alloc in self.grant.placed]
        return pools

    @property
    def node_idx(self) -> list[int]:
        """The node index of each bundle."""
        return [i for i, _ in self.grant.placed]


class Holder:
    """Everything the broker knows about one holder id."""

    # Slots for speed: one per actor.
    __slots__ = (
        "edges_holder", "edges_request", "grants", "hid", "min_key", "requests", "serial",
        "version",
    )  # fmt: skip

    def __init__(self, hid: Hashable) -> None:
        self.hid = hid
        self.grants: dict[Hashable, Grant] = {}
        self.requests: dict[Hashable, Request] = {}
        self.edges_request: set[Hashable] = set()
        # holder waited on -> the edge's number (newer edges have larger numbers)
        self.edges_holder: dict[Hashable, int] = {}
        self.min_key: int | None = None
        # Whether it serves one message at a time (an ask cycle through it is a deadlock).
        self.serial = True
        # Bumped on every change of its edges or grants (the deadlock check validates by it).
        self.version = 0

    def is_blocked(self) -> bool:
        """Whether it waits on anything (a request or another holder)."""
        return bool(self.edges_request or self.edges_holder)

    def is_idle(self) -> bool:
        """Whether the record can be dropped."""
        return not (self.grants or self.requests or self.edges_request or self.edges_holder)

    def recompute_min_key(self) -> None:
        """Refresh the oldest admission key after a grant went away."""
        self.min_key = min((g.key for g in self.grants.values()), default=None)
