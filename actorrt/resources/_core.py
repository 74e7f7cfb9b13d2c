"""The broker's state and its request / grant / release machinery (see ``_broker``).

:class:`BrokerCore` keeps every record and implements placement into the cluster and into
groups, granting, releasing and group removal. The public :class:`~actorrt.resources.Broker`
subclass adds the input methods, time-based work and reports.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Hashable, Iterable, Mapping, Sequence

from actorrt._errors import ResourceError

from ._deadlock import Found
from ._events import BundlePlacement, DeadlockReport, Event, Failed, Granted, GroupTarget, Revoked
from ._feasibility import check_cluster, check_in_group
from ._node import NodeInventory
from ._placement import Placed, PlacementStrategy, Shape, parse_bundles, parse_strategy
from ._pool import ResourcePool
from ._queue import ClusterQueue
from ._spec import Resources, parse_resources
from ._state import DONE, GRANTED, Grant, Group, Holder, Request, WaitQueue

__all__ = ["BrokerCore"]

_PACK = PlacementStrategy.PACK
_MAX_DEPTH = 1000  # bound on parent chains (guards against a cycle in caller-given parents)
DEADLOCK_REPORTS = 32  # deadlock reports kept for views


class BrokerCore:
    """State and the request/grant/release machinery; :class:`Broker` adds the rest."""

    def __init__(
        self,
        nodes: Iterable[NodeInventory] = (),
        *,
        reservation_depth: int = 4,
        deadlock_delay: float = 0.15,
        stall_after: float = 10.0,
        now: float = 0.0,
    ) -> None:
        if reservation_depth < 0:
            raise ValueError(f"reservation_depth={reservation_depth!r} must be >= 0")
        if deadlock_delay < 0 or stall_after <= 0:
            raise ValueError("deadlock_delay must be >= 0 and stall_after > 0")
        self._now = now
        self._nodes: list[NodeInventory] = []
        self._empty: list[ResourcePool] = []
        # Node indices in service, in placement order; nodes being drained (no new grants,
        # existing ones stay until released) and nodes gone (lost, or drained and empty)
        # keep their index but leave ``_order`` (``_membership``).
        self._order: list[int] = []
        self._draining: set[int] = set()
        self._gone: set[int] = set()
        self._queue = ClusterQueue(reservation_depth, now)
        self._requests: dict[Hashable, Request] = {}
        self._grants: dict[Hashable, Grant] = {}
        self._groups: dict[Hashable, Group] = {}
        self._groups_waiting: set[Hashable] = set()
        self._holders: dict[Hashable, Holder] = {}
        self._parents: dict[Hashable, Hashable] = {}
        self._child_ids: dict[Hashable, set[Hashable]] = {}  # the reverse of _parents
        self._holder_waiters: dict[Hashable, set[Hashable]] = {}
        # The last deadlocks found and broken, newest last (for views: the dashboard).
        self.deadlock_reports: deque[DeadlockReport] = deque(maxlen=DEADLOCK_REPORTS)
        self._shapes: dict[tuple[object, ...], Shape] = {}
        self._feasible: set[tuple[object, ...]] = set()
        self._seq = 0
        self._deadlock_delay = deadlock_delay
        self._stall_after = stall_after
        self._edge_seq = 0
        # Requests an actor awaits, by when they count as stalled whatever their queue does
        # (a heap of (due, seq, request id), stale entries skipped); and those reported.
        self._awaited: list[tuple[float, int, Hashable]] = []
        self._awaited_known: set[Hashable] = set()
        self._stall_told: set[Hashable] = set()
        # Queued requests of a stalled queue still to report on, a bounded batch per poll.
        self._stall_queue: deque[tuple[Hashable, WaitQueue]] = deque()
        # The deadlock check: due ``deadlock_delay`` after the first wait edge it has not
        # seen, whatever happens meanwhile; a running check (a generator, in slices).
        self._check_due: float | None = None
        self._check: Generator[None, None, Found | None] | None = None
        self._checked_at = now
        for node in nodes:
            self._add_node(node)

    # -- helpers -----------------------------------------------------------------------------

    def _tick(self, now: float | None) -> float:
        if now is not None and now > self._now:
            self._now = now
        return self._now

    def _add_node(self, node: NodeInventory) -> None:
        if not isinstance(node, NodeInventory):
            raise TypeError(f"expected a NodeInventory, got {type(node).__name__}")
        gone = self._gone
        if any(
            n.node_id == node.node_id for i, n in enumerate(self._nodes) if i not in gone
        ):
            raise ValueError(f"a node with id {node.node_id!r} is already known")
        self._nodes.append(node)
        empty = node.copy()
        empty.free = dict(empty.capacity)
        empty.gpu_free = list(empty.gpu_capacity)
        self._empty.append(empty)
        self._order.append(len(self._nodes) - 1)
        self._queue.dirty.add(len(self._nodes) - 1)
        self._feasible.clear()

    def _holder(self, hid: Hashable) -> Holder:
        h = self._holders.get(hid)
        if h is None:
            h = self._holders[hid] = Holder(hid)
        return h

    def _drop_if_idle(self, h: Holder) -> None:
        if h.is_idle() and self._holders.get(h.hid) is h:
            del self._holders[h.hid]

    def _shape(self, bundles: tuple[Resources, ...], strategy: PlacementStrategy) -> Shape:
        key = (bundles, strategy)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = Shape(bundles, strategy)
        return shape

    def _unparent(self, holder: Hashable) -> None:
        parent = self._parents.pop(holder, None)
        if parent is not None:
            siblings = self._child_ids.get(parent)
            if siblings is not None:
                siblings.discard(holder)
                if not siblings:
                    del self._child_ids[parent]

    def _ancestors(self, hid: Hashable) -> list[Hashable]:
        """``hid`` and its ancestors, nearest first."""
        chain = [hid]
        parents = self._parents
        while len(chain) < _MAX_DEPTH:
            parent = parents.get(chain[-1])
            if parent is None or parent in chain:
                break
            chain.append(parent)
        return chain

    def _admission_key(self, hid: Hashable, seq: int) -> int:
        key = seq
        holders = self._holders
        for a in self._ancestors(hid):
            h = holders.get(a)
            if h is not None and h.min_key is not None and h.min_key < key:
                key = h.min_key
        return key

    # -- request -----------------------------------------------------------------------------

    def _target(self, hid: Hashable, placement: object) -> tuple[Group | None, int | None, bool]:
        if placement == "cluster":
            return None, None, False
        if placement == "auto":
            for a in self._ancestors(hid):
                h = self._holders.get(a)
                if h is None:
                    continue
                for grant in h.grants.values():
                    if grant.group is not None:
                        return grant.group, None, True
            return None, None, False
        if isinstance(placement, GroupTarget):
            group = self._groups.get(placement.group)
            if group is None:
                raise ValueError(
                    f"placement={placement!r}: no placement group {placement.group!r} is "
                    "reserved (it was removed, or never granted)"
                )
            b = placement.bundle
            if b is not None and (not isinstance(b, int) or not 0 <= b < len(group.pools)):
                raise ValueError(
                    f"placement={placement!r}: bundle index must be in 0..{len(group.pools) - 1}"
                )
            return group, b, False
        raise ValueError(
            f"placement={placement!r}: expected 'auto', 'cluster' or GroupTarget(group, bundle)"
        )

    def _new_request(
        self,
        rid: Hashable,
        holder: Hashable,
        resources: Mapping[str, object] | Resources | None,
        bundles: Sequence[Mapping[str, object] | Resources] | None,
        strategy: str | PlacementStrategy,
        placement: object,
        allow_empty_head: bool,
    ) -> Request:
        if rid in self._requests or rid in self._grants:
            raise ValueError(f"request id {rid!r} is already in use")
        if bundles is not None:
            if resources is not None:
                raise TypeError("give resources or bundles, not both")
            if isinstance(placement, GroupTarget):
                raise ValueError(
                    "a placement group is reserved from the cluster, never inside another group"
                )
            if placement not in ("auto", "cluster"):
                self._target(holder, placement)  # raises with the allowed forms
            shape = self._shape(
                parse_bundles(bundles, allow_empty_head=allow_empty_head),
                parse_strategy(strategy),
            )
            group, bundle, captured, is_group = None, None, False, True
        else:
            shape = self._shape((parse_resources(resources),), _PACK)
            group, bundle, captured = self._target(holder, placement)
            is_group = False
        self._seq += 1
        seq = self._seq
        if group is None:
            if shape.key not in self._feasible:
                check_cluster(rid, holder, shape, self._nodes, self._empty, self._order)
                self._feasible.add(shape.key)
            key = self._admission_key(holder, seq)
        else:
            chain = [
                (a, list(self._holders[a].grants.values()) if a in self._holders else [])
                for a in self._ancestors(holder)
            ]
            check_in_group(rid, holder, shape.bundles[0], group, bundle, chain, captured)
            key = seq
        return Request(
            rid, holder, shape, is_group=is_group, group=group, bundle=bundle,
            key=key, seq=seq, arrival=self._now,
        )  # fmt: skip

    def _enqueue(self, req: Request) -> list[Event]:
        self._requests[req.rid] = req
        self._holder(req.holder).requests[req.rid] = req
        group = req.group
        if group is not None:
            placed = self._place_in_group(req, group)
            if placed is not None:
                return [self._grant_in_group(req, group, placed)]
            group.queue[req.rid] = req
            group.waits.arrivals.append(req)
            self._groups_waiting.add(group.gid)
            return []
        queue = self._queue
        if queue.reservations and queue.older_than_reserved(req):
            queue.add(req)
            return self._schedule()
        placed_c = queue.admit(req, self._nodes, self._order, self._empty)
        if placed_c is not None:
            return [self._grant_cluster(req, placed_c)]
        return []

    # -- grants ------------------------------------------------------------------------------

    def _finish_request(self, req: Request, status: int) -> Holder:
        req.status = status
        del self._requests[req.rid]
        if req.waiters:
            self._awaited_known.discard(req.rid)
            self._stall_told.discard(req.rid)
        h = self._holders[req.holder]
        del h.requests[req.rid]
        for hid in req.waiters:
            waiter = self._holders.get(hid)
            if waiter is not None:
                waiter.edges_request.discard(req.rid)
                waiter.version += 1
                if waiter is not h:
                    self._drop_if_idle(waiter)
        req.waiters.clear()
        return h

    def _grant_cluster(self, req: Request, placed: Placed) -> Granted:
        h = self._finish_request(req, GRANTED)
        rid = req.rid
        grant = Grant(rid, req.holder, req.key, req.shape, placed, None)
        self._grants[rid] = grant
        h.grants[rid] = grant
        h.version += 1
        if h.min_key is None or req.key < h.min_key:
            h.min_key = req.key
        now = self._now
        self._queue.waits.progressed(now)
        nodes = self._nodes
        bundles = req.shape.bundles
        if req.is_group:
            group = Group(rid, grant, bundles, nodes, now)
            grant.owned = group
            self._groups[rid] = group
            placements = []
            for b, (i, alloc) in enumerate(placed):
                node = nodes[i]
                gpus = node.gpu_shares(alloc) if alloc.gpus else ()
                placements.append(BundlePlacement(node.node_id, bundles[b], gpus, None, b))
            return Granted(rid, req.holder, tuple(placements), rid)
        i, alloc = placed[0]
        node = nodes[i]
        one = BundlePlacement(node.node_id, bundles[0], node.gpu_shares(alloc), None, None)
        return Granted(rid, req.holder, (one,), None)

    def _place_in_group(self, req: Request, group: Group) -> Placed | None:
        res = req.shape.bundles[0]
        pools = group.pools
        candidates = range(len(pools)) if req.bundle is None else (req.bundle,)
        for b in candidates:
            alloc = pools[b].allocate(res)
            if alloc is not None:
                return [(b, alloc)]
        return None

    def _grant_in_group(self, req: Request, group: Group, placed: Placed) -> Granted:
        h = self._finish_request(req, GRANTED)
        rid = req.rid
        grant = Grant(rid, req.holder, req.key, req.shape, placed, group)
        self._grants[rid] = grant
        h.grants[rid] = grant
        h.version += 1
        if h.min_key is None or req.key < h.min_key:
            h.min_key = req.key
        group.members[rid] = grant
        group.waits.progressed(self._now)
        b, alloc = placed[0]
        node = self._nodes[group.node_idx[b]]
        one = BundlePlacement(
            node.node_id, req.shape.bundles[0], group.pools[b].gpu_shares(alloc), group.gid, b
        )
        return Granted(rid, req.holder, (one,), None)

    def _schedule(self) -> list[Event]:
        """A full pass of the cluster queue (after something was freed)."""
        queue = self._queue
        if not queue.waiting:
            if queue.reservations:
                queue.drop_reservations(self._nodes)
            queue.dirty.clear()
            return []
        if self._draining or self._gone:
            queue.dirty -= self._draining | self._gone  # never placed on again
        granted = queue.schedule(self._nodes, self._order, self._empty)
        return [self._grant_cluster(req, placed) for req, placed in granted]

    def _schedule_group(self, group: Group) -> list[Event]:
        events: list[Event] = []
        for req in list(group.queue.values()):
            placed = self._place_in_group(req, group)
            if placed is not None:
                del group.queue[req.rid]
                events.append(self._grant_in_group(req, group, placed))
        if not group.queue:
            self._groups_waiting.discard(group.gid)
        return events

    # -- release -----------------------------------------------------------------------------

    def _release_grant(self, grant: Grant, events: list[Event]) -> bool:
        """Give one grant back; returns whether cluster capacity was freed."""
        del self._grants[grant.rid]
        h = self._holders[grant.holder]
        del h.grants[grant.rid]
        h.version += 1
        if grant.key == h.min_key:
            h.recompute_min_key()
        group = grant.group
        if group is not None:
            del group.members[grant.rid]
            b, alloc = grant.placed[0]
            group.pools[b].release(alloc)
            if group.queue:
                events.extend(self._schedule_group(group))
            return False
        nodes = self._nodes
        dirty = self._queue.dirty
        for i, alloc in grant.placed:
            nodes[i].release(alloc)
            dirty.add(i)
        if grant.owned is not None:
            self._remove_group(grant.owned, events)
        if self._draining:
            self._retire_drained(grant.placed)
        return True

    def _retire_drained(self, placed: Placed) -> None:
        """A draining node whose last grant was released is gone (it leaves the totals)."""
        for i, _ in placed:
            if i in self._draining and self._nodes[i].is_idle():
                self._draining.discard(i)
                self._gone.add(i)

    def _remove_group(
        self, group: Group, events: list[Event], node: Hashable | None = None
    ) -> None:
        del self._groups[group.gid]
        self._groups_waiting.discard(group.gid)
        for grant in list(group.members.values()):
            del self._grants[grant.rid]
            h = self._holders[grant.holder]
            del h.grants[grant.rid]
            h.version += 1
            h.recompute_min_key()
            events.append(Revoked(grant.rid, grant.holder, group.gid, node))
            self._drop_if_idle(h)
        group.members.clear()
        for req in list(group.queue.values()):
            error = ResourceError(
                f"{req.rid!r} of {req.holder} waited in placement group {group.gid!r}, which "
                "was removed"
            )
            events.append(self._fail(req, error)[0])

    def _fail(self, req: Request, error: ResourceError) -> tuple[Failed, bool]:
        """Fail a waiting request; also returns whether a cluster pass is needed."""
        needs_pass = self._withdraw(req)
        return Failed(req.rid, req.holder, error), needs_pass

    def _withdraw(self, req: Request) -> bool:
        """Withdraw a waiting request; returns whether a cluster pass is needed."""
        h = self._finish_request(req, DONE)
        self._drop_if_idle(h)
        group = req.group
        if group is not None:
            group.queue.pop(req.rid, None)
            if not group.queue:
                self._groups_waiting.discard(group.gid)
            return False
        return self._queue.discard(req)
