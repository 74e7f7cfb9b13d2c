"""The cluster queue: priority order, reservations for the oldest, backfill for the rest.

Order. Waiting requests are served by ``(key, seq)``: ``key`` is the admission key of the oldest
grant held by the request's holder or one of its ancestors (an actor that already holds
resources is served as early as it was admitted: no priority inversion), else the request's own
arrival number ``seq``; ``seq`` breaks ties (first come, first served).

Reservations. A pass walks the queue in that order. A request that fits what is free is granted.
The first ``depth`` requests that do not fit (default 4: "the oldest few") each get a
*reservation*: on the nodes of a fixed plan for it (chosen once, on the node totals, preferring
the nodes with most of what it needs free), every free amount it is short of is set aside, up to
what it needs. Reserved amounts are taken out of the pools, so any later request is granted only
from what nobody older reserved (backfill). A reservation only ever grows (what is set aside
stays set aside, and what frees on its nodes joins it) until the request fits, so a large gang is
never starved by a stream of small requests, while small requests still fill every unreserved
free slot.

Cost. Requests of one shape (same bundles and strategy) are interchangeable, so they share a
sorted per-shape list. Within a pass, free amounts only shrink; once a shape's oldest request
does not fit, no other request of that shape can, and the pass stops looking at that shape
(after handing out any remaining reservations). A pass therefore costs
``O((shapes + grants + depth) · log shapes)`` placement attempts, not one per waiting request:
100,000 waiting requests of a few shapes cost what a few do. A pass runs when something is
freed (release, cancel of a reserved request, group removal, a node added). Every waiting
request failed on every node when it was last tried, and since then only the nodes that were
freed (or lost a reservation) gained anything, so a single-bundle request is tried on those
nodes only: its cost does not grow with the cluster. A multi-bundle gang is tried on all nodes
(linear in nodes). A new request does
not run a pass: with nothing freed since the last one, it is granted at once if it fits what is
unreserved, else it queues (taking a reservation if fewer than ``depth`` are held); only a new
request older than a reserved one (by inherited key) runs a full pass.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Hashable, Sequence

from ._placement import Placed, Shape, place, place_or_unknown, undo
from ._pool import ResourcePool
from ._spec import UNIT
from ._state import GRANTED, WAITING, Request, WaitQueue

__all__ = ["ClusterQueue", "Reservation"]


class _ShapeQueue:
    """Waiting requests of one shape, sorted by ``(key, seq)``, with lazy deletion."""

    __slots__ = ("alive", "head", "items", "shape")

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.items: list[tuple[int, int, Request]] = []
        self.head = 0
        self.alive = 0

    def add(self, req: Request) -> None:
        entry = (req.key, req.seq, req)
        items = self.items
        if not items or (req.key, req.seq) > items[-1][:2]:
            items.append(entry)
        else:
            bisect.insort(items, entry, lo=self.head, key=lambda e: (e[0], e[1]))
        self.alive += 1

    def first(self) -> int:
        """Index of the first request still waiting, or -1."""
        items = self.items
        head = self.head
        while head < len(items) and items[head][2].status != WAITING:
            head += 1
        if head > 64 and head * 2 > len(items):
            del items[:head]
            head = 0
        self.head = head
        return head if head < len(items) else -1

    def after(self, i: int) -> int:
        """Index of the next waiting request after ``i``, or -1."""
        items = self.items
        i += 1
        while i < len(items) and items[i][2].status != WAITING:
            i += 1
        return i if i < len(items) else -1


class Reservation:
    """Amounts set aside on nodes for one waiting request."""

    __slots__ = ("parts", "request")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.parts: list[tuple[int, tuple[tuple[str, int], ...], tuple[tuple[int, int], ...]]] = []

    def amounts(self) -> dict[str, int]:
        """Total reserved per resource name (GPU summed over devices), in units."""
        total: dict[str, int] = {}
        for _, other, gpus in self.parts:
            for k, v in other:
                total[k] = total.get(k, 0) + v
            for _, v in gpus:
                total["GPU"] = total.get("GPU", 0) + v
        return total


class ClusterQueue:
    """Waiting cluster requests and the reservations of the oldest of them."""

    def __init__(self, depth: int, now: float) -> None:
        self.depth = depth
        self.shapes: dict[tuple[object, ...], _ShapeQueue] = {}
        self.waiting = 0
        self.reservations: dict[Hashable, Reservation] = {}
        self.waits = WaitQueue(now)
        # Nodes that gained free capacity since the last pass (releases, a new node).
        self.dirty: set[int] = set()

    def __len__(self) -> int:
        return self.waiting

    def add(self, req: Request) -> None:
        """Queue a request (it stays until its status leaves ``WAITING``)."""
        sq = self.shapes.get(req.shape.key)
        if sq is None:
            sq = self.shapes[req.shape.key] = _ShapeQueue(req.shape)
        sq.add(req)
        self.waiting += 1
        self.waits.arrivals.append(req)

    def discard(self, req: Request) -> bool:
        """Forget a request whose status the caller already changed.

        Returns:
            Whether it held a reservation (the caller must then run a pass).
        """
        sq = self.shapes.get(req.shape.key)
        if sq is not None:
            sq.alive -= 1
            if not sq.alive:
                del self.shapes[req.shape.key]
        self.waiting -= 1
        return req.rid in self.reservations

    def waiting_unordered(self) -> list[Request]:
        """Every waiting request, shape by shape (each shape's in order; no sort)."""
        return [
            e[2] for sq in self.shapes.values() for e in sq.items[sq.head :]
            if e[2].status == WAITING
        ]

    def waiting_requests(self) -> list[Request]:
        """Every waiting request, in service order."""
        found = self.waiting_unordered()
        found.sort(key=lambda r: (r.key, r.seq))
        return found

    def older_than_reserved(self, req: Request) -> bool:
        """Whether ``req`` comes before some request that holds a reservation."""
        mine = (req.key, req.seq)
        return any(mine < (r.request.key, r.request.seq) for r in self.reservations.values())

    def admit(
        self,
        req: Request,
        pools: Sequence[ResourcePool],
        order: Sequence[int],
        empty: Sequence[ResourcePool],
    ) -> Placed | None:
        """Fast path for a new request when nothing was freed since the last pass.

        Returns:
            Its placement if it fits what is unreserved now; else ``None`` and it is queued
            (with a reservation if fewer than ``depth`` are held).
        """
        placed = place(req.shape, pools, order)
        if placed is not None:
            return placed
        self.add(req)
        if len(self.reservations) < self.depth:
            self._reserve(req, pools, empty, order)
        return None

    def schedule(
        self,
        pools: Sequence[ResourcePool],
        order: Sequence[int],
        empty: Sequence[ResourcePool],
    ) -> list[tuple[Request, Placed]]:
        """A full pass: grant what fits in service order, reserve for the oldest blocked.

        Granted requests are removed from the queue; the caller records the grants.
        """
        for res in self.reservations.values():
            self.dirty.update(node for node, _, _ in res.parts)
        self.drop_reservations(pools)
        # Every waiting request failed on every node when it was last tried, and since then
        # only the dirty nodes gained anything: a single-bundle request need only try those.
        fresh = sorted(self.dirty)
        self.dirty.clear()
        heap: list[tuple[int, int, int, _ShapeQueue, int, bool]] = []
        for n, sq in enumerate(list(self.shapes.values())):
            i = sq.first()
            if i >= 0:
                e = sq.items[i]
                heap.append((e[0], e[1], n, sq, i, False))
        heapq.heapify(heap)
        granted: list[tuple[Request, Placed]] = []
        depth_left = self.depth
        while heap:
            _, _, n, sq, i, blocked = heapq.heappop(heap)
            req = sq.items[i][2]
            if not blocked:
                single = len(req.shape.bundles) == 1
                placed = place(req.shape, pools, fresh if single else order)
                if placed is not None:
                    granted.append((req, placed))
                    req.status = GRANTED
                    self.discard(req)
                    self._push_next(heap, sq, i, n, blocked=False)
                    continue
            if depth_left > 0:
                self._reserve(req, pools, empty, order)
                depth_left -= 1
                self._push_next(heap, sq, i, n, blocked=True)
        return granted

    @staticmethod
    def _push_next(
        heap: list[tuple[int, int, int, _ShapeQueue, int, bool]],
        sq: _ShapeQueue,
        i: int,
        n: int,
        *,
        blocked: bool,
    ) -> None:
        j = sq.after(i)
        if j >= 0:
            e = sq.items[j]
            heapq.heappush(heap, (e[0], e[1], n, sq, j, blocked))

    def drop_reservations(self, pools: Sequence[ResourcePool]) -> None:
        """Give every reserved amount back to the pools."""
        for res in self.reservations.values():
            for node, other, gpus in res.parts:
                pool = pools[node]
                free = pool.free
                for k, v in other:
                    free[k] += v
                gpu_free = pool.gpu_free
                for d, v in gpus:
                    gpu_free[d] += v
        self.reservations.clear()

    def _reserve(
        self,
        req: Request,
        pools: Sequence[ResourcePool],
        empty: Sequence[ResourcePool],
        order: Sequence[int],
    ) -> None:
        res = Reservation(req)
        self.reservations[req.rid] = res
        if req.plan is None:
            req.plan = _plan(req.shape, pools, empty, order)
        if not req.plan:
            return
        by_node: dict[int, list[int]] = {}
        for b, node in enumerate(req.plan):
            by_node.setdefault(node, []).append(b)
        for node, bundle_ids in by_node.items():
            part = _set_aside(req.shape, bundle_ids, pools[node])
            if part[0] or part[1]:
                res.parts.append((node, *part))


def _plan(
    shape: Shape,
    pools: Sequence[ResourcePool],
    empty: Sequence[ResourcePool],
    order: Sequence[int],
) -> list[int]:
    """Nodes in service (``order``) for each bundle on the node totals, preferring nodes with
    most of it free now."""
    need = shape.total

    def score(i: int) -> float:
        pool = pools[i]
        s = 0.0
        for k, v in need.other_units:
            s += min(pool.free.get(k, 0), v) / v
        if need.gpu_units:
            s += min(sum(pool.gpu_free), need.gpu_units) / need.gpu_units
        return -s

    ranked = sorted(order, key=lambda i: (score(i), i))
    placed = place_or_unknown(shape, empty, ranked)
    if not isinstance(placed, list):
        return []
    undo(empty, placed)
    return [node for node, _ in placed]


def _set_aside(
    shape: Shape, bundle_ids: list[int], pool: ResourcePool
) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[int, int], ...]]:
    """Take from ``pool`` whatever is free of what these bundles need, up to their need."""
    need: dict[str, int] = {}
    for b in bundle_ids:
        for k, v in shape.bundles[b].other_units:
            need[k] = need.get(k, 0) + v
    other = tuple(
        (k, min(v, pool.free.get(k, 0))) for k, v in need.items() if pool.free.get(k, 0) > 0
    )
    avail = list(pool.gpu_free)
    gpus: dict[int, int] = {}
    for b in sorted(bundle_ids, key=lambda b: -shape.bundles[b].gpu_units):
        g = shape.bundles[b].gpu_units
        if not g:
            continue
        whole = [i for i, c in enumerate(pool.gpu_capacity) if c == UNIT]
        picks = sorted(whole if g >= UNIT else range(len(avail)), key=lambda i: (-avail[i], i))
        for i in picks[: max(1, g // UNIT)]:
            t = min(g if g < UNIT else UNIT, avail[i])
            if t > 0:
                avail[i] -= t
                gpus[i] = gpus.get(i, 0) + t
    taken = tuple(gpus.items())
    pool.take(other, taken)
    return other, taken
