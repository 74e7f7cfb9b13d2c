"""Deadlock detection: the reduction of DESIGN.md §4 and the choice of a victim.

The reduction works on a copy of the state. Start from what is free (reservations count as
free: they only order the queue). Repeatedly let a holder *finish*, giving back everything it
holds, when it is not blocked, or when every wait edge it has is satisfiable now: a request
edge whose request the real placement logic would grant from what is free in the copy (or that
is no longer waiting), a holder edge whose holder has finished or is not blocked. A finished
holder that reserved a group gives the group back; grants inside that group vanish with it, and
requests waiting in it count as satisfiable (they fail, which unblocks their waiters).

What cannot finish is deadlocked. There are no false positives under the model: a holder that
is not blocked is assumed to end, and every placement check is the one the broker really uses.

The victim is the newest waiting request (by arrival) that a deadlocked holder waits on and
whose failure lets the reduction progress: once its waiters finish (a failed request unblocks
them, and the model assumes they then end), some other deadlocked holder finishes too, or none
is left. If no candidate does (it cannot happen for a pure resource deadlock, but keeps the
rule total), the newest candidate is chosen. A deadlock made only of asks between actors has no
request to fail and is not reported here.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from ._feasibility import FIX_HINT
from ._node import NodeInventory
from ._placement import place, undo
from ._pool import ResourcePool
from ._queue import ClusterQueue
from ._spec import Resources
from ._state import WAITING, Grant, Group, Holder, Request

__all__ = ["Deadlock", "describe_holdings", "describe_request", "find_deadlock"]


class _Sim:
    """A scratch copy of every pool, for the reduction."""

    def __init__(
        self,
        nodes: list[ResourcePool],
        bundles: dict[Hashable, list[ResourcePool]],
        removed: set[Hashable],
    ) -> None:
        self.nodes = nodes
        self.bundles = bundles
        self.removed = removed

    @classmethod
    def of(
        cls, nodes: Sequence[NodeInventory], queue: ClusterQueue, groups: Mapping[Hashable, Group]
    ) -> _Sim:
        sim = cls(
            [n.copy() for n in nodes],
            {gid: [p.copy() for p in g.pools] for gid, g in groups.items()},
            set(),
        )
        for res in queue.reservations.values():
            for node, other, gpus in res.parts:
                pool = sim.nodes[node]
                for k, v in other:
                    pool.free[k] += v
                for d, v in gpus:
                    pool.gpu_free[d] += v
        return sim

    def copy(self) -> _Sim:
        return _Sim(
            [p.copy() for p in self.nodes],
            {gid: [p.copy() for p in pools] for gid, pools in self.bundles.items()},
            set(self.removed),
        )

    def release(self, holder: Holder) -> None:
        for grant in holder.grants.values():
            if grant.group is not None:
                if grant.group.gid not in self.removed:
                    pools = self.bundles[grant.group.gid]
                    for b, alloc in grant.placed:
                        pools[b].release(alloc)
                continue
            for i, alloc in grant.placed:
                self.nodes[i].release(alloc)
            if grant.owned is not None:
                self.removed.add(grant.owned.gid)

    def grantable(self, req: Request, order: Sequence[int]) -> bool:
        if req.group is not None:
            if req.group.gid in self.removed:
                return True
            pools = self.bundles[req.group.gid]
            res = req.shape.bundles[0]
            candidates = range(len(pools)) if req.bundle is None else (req.bundle,)
            return any(pools[b].fits(res) for b in candidates)
        placed = place(req.shape, self.nodes, order)
        if placed is None:
            return False
        undo(self.nodes, placed)
        return True


class Deadlock:
    """A proven deadlock: the request to fail and the message that explains it."""

    def __init__(self, victim: Request, message: str, holders: tuple[Hashable, ...]) -> None:
        self.victim = victim
        self.message = message
        self.holders = holders


def _reduce(
    sim: _Sim,
    remaining: set[Hashable],
    holders: Mapping[Hashable, Holder],
    requests: Mapping[Hashable, Request],
    order: Sequence[int],
) -> None:
    """Finish every holder that can finish, in place (``remaining`` shrinks)."""
    changed = True
    while changed:
        changed = False
        for hid in list(remaining):
            h = holders[hid]
            if _can_finish(h, sim, remaining, holders, requests, order):
                sim.release(h)
                remaining.discard(hid)
                changed = True


def _can_finish(
    h: Holder,
    sim: _Sim,
    remaining: set[Hashable],
    holders: Mapping[Hashable, Holder],
    requests: Mapping[Hashable, Request],
    order: Sequence[int],
) -> bool:
    for x in h.edges_holder:
        other = holders.get(x)
        if x in remaining and other is not None and other.is_blocked():
            return False
    for rid in h.edges_request:
        req = requests.get(rid)
        if req is not None and req.status == WAITING and not sim.grantable(req, order):
            return False
    return True


def find_deadlock(
    nodes: Sequence[NodeInventory],
    queue: ClusterQueue,
    groups: Mapping[Hashable, Group],
    holders: Mapping[Hashable, Holder],
    requests: Mapping[Hashable, Request],
    order: Sequence[int],
) -> Deadlock | None:
    """Run the reduction; return the victim and message if something is deadlocked."""
    sim = _Sim.of(nodes, queue, groups)
    free_now = _free(sim)
    remaining = set(holders)
    _reduce(sim, remaining, holders, requests, order)
    if not remaining:
        return None
    candidates = sorted(
        {
            requests[rid]
            for hid in remaining
            for rid in holders[hid].edges_request
            if rid in requests and requests[rid].status == WAITING
        },
        key=lambda r: r.seq,
        reverse=True,
    )
    if not candidates:
        return None
    victim = candidates[0]
    for req in candidates:
        waiters = {hid for hid in remaining if req.rid in holders[hid].edges_request}
        rest = remaining - waiters
        if not rest:
            victim = req
            break
        trial = sim.copy()
        for hid in sorted(waiters, key=repr):
            trial.release(holders[hid])
        before = len(rest)
        _reduce(trial, rest, holders, requests, order)
        if len(rest) < before:
            victim = req
            break
    message = _message(victim, remaining, holders, requests, free_now)
    return Deadlock(victim, message, tuple(sorted(remaining, key=repr)))


def describe_holdings(holder: Holder) -> str:
    """What a holder holds, for messages."""
    parts = []
    for grant in holder.grants.values():
        parts.append(_describe_grant(grant))
    return "; ".join(parts) if parts else "nothing"


def _describe_grant(grant: Grant) -> str:
    if grant.owned is not None:
        bundles = ", ".join(str(b) for b in grant.shape.bundles)
        return f"placement group {grant.rid!r} [{bundles}]"
    if grant.group is not None:
        b = grant.placed[0][0]
        return f"{grant.shape.bundles[0]} in bundle {b} of group {grant.group.gid!r}"
    return str(grant.shape.bundles[0])


def describe_request(req: Request) -> str:
    """A request, for messages: what it asks and where."""
    if req.is_group:
        bundles = ", ".join(str(b) for b in req.shape.bundles)
        what = f"placement group [{bundles}] ({req.shape.strategy.value})"
    else:
        what = str(req.shape.bundles[0])
    if req.group is not None:
        where = "any bundle" if req.bundle is None else f"bundle {req.bundle}"
        return f"request {req.rid!r} for {what} in {where} of group {req.group.gid!r}"
    return f"request {req.rid!r} for {what} from the cluster"


def _waits(h: Holder, requests: Mapping[Hashable, Request]) -> str:
    edges = sorted(h.edges_request, key=repr)
    parts = [describe_request(requests[r]) for r in edges if r in requests]
    parts += [f"an answer from {x}" for x in sorted(h.edges_holder, key=repr)]
    return " and ".join(parts) if parts else "nothing"


def _free(sim: _Sim) -> Resources:
    total = Resources()
    for pool in sim.nodes:
        total = total + pool.free_resources()
    return total


def _message(
    victim: Request,
    remaining: set[Hashable],
    holders: Mapping[Hashable, Holder],
    requests: Mapping[Hashable, Request],
    free_now: Resources,
) -> str:
    waiters = sorted(
        (hid for hid in remaining if victim.rid in holders[hid].edges_request), key=repr
    )
    main = waiters[0] if waiters else victim.holder
    main_h = holders.get(main)
    held = describe_holdings(main_h) if main_h is not None else "nothing"
    others = [
        f"{hid} holds {describe_holdings(holders[hid])} and waits for "
        f"{_waits(holders[hid], requests)}"
        for hid in sorted(remaining, key=repr)
        if hid != main
    ]
    rest = "; ".join(others) if others else "nobody else: it waits on itself"
    return (
        f"resource deadlock: {main} holds {held} and waits for {describe_request(victim)}, "
        f"which can only be granted once resources held by blocked actors are freed. The rest "
        f"is held by: {rest}. Free now: {free_now}. None of them can proceed, so this "
        f"request fails. To fix: {FIX_HINT}."
    )
