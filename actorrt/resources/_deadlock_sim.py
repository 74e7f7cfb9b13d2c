"""The deadlock check's scratch state: what is free while the reduction lets holders finish
(see ``_deadlock``), with tentative releases that can be undone."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from ._placement import place, undo
from ._pool import Allocation, ResourcePool
from ._spec import Resources
from ._state import Grant, Group, Request

__all__ = ["Key", "Log", "Sim", "free_total", "request_key"]


class Log:
    """What a tentative release changed, to undo it."""

    __slots__ = ("freed", "removed")

    def __init__(self) -> None:
        self.freed: list[tuple[ResourcePool, Allocation]] = []
        self.removed: list[tuple[Hashable, list[ResourcePool]]] = []


class Sim:
    """What is free in the reduction: node pools, and the bundle pools of groups that some
    captured request waits in (``None``: the group goes, its requests fail)."""

    def __init__(self, empty: Sequence[ResourcePool], order: Sequence[int]) -> None:
        self.nodes = [p.copy() for p in empty]
        self.order = order
        self.groups: dict[Hashable, list[ResourcePool] | None] = {}
        self.cluster_dirty = True
        self.dirty_groups: set[Hashable] = set()

    def group(self, group: Group, live: Mapping[Hashable, Group], blocked: Mapping[
        Hashable, object
    ]) -> None:
        gid = group.gid
        if gid in self.groups:
            return
        self.dirty_groups.add(gid)
        if live.get(gid) is not group or group.grant.holder not in blocked:
            self.groups[gid] = None  # removed, or held by a holder that ends: it goes
            return
        pools = []
        for pool in group.pools:
            twin = pool.copy()
            twin.free = dict(twin.capacity)
            twin.gpu_free = list(twin.gpu_capacity)
            pools.append(twin)
        self.groups[gid] = pools

    def hold(self, grant: Grant) -> None:
        if grant.group is not None:
            pools = self.groups.get(grant.group.gid)
            if pools is not None:
                for b, alloc in grant.placed:
                    pools[b].take(alloc.other, alloc.gpus)
            return
        for i, alloc in grant.placed:
            self.nodes[i].take(alloc.other, alloc.gpus)

    def release(self, grant: Grant, log: Log | None = None) -> None:
        """Give a grant back (and its group, if it reserved one); ``log`` records how to undo
        it."""
        if grant.group is not None:
            gid = grant.group.gid
            pools = self.groups.get(gid)
            if pools is not None:
                for b, alloc in grant.placed:
                    pools[b].release(alloc)
                    if log is not None:
                        log.freed.append((pools[b], alloc))
                self.dirty_groups.add(gid)
            return
        for i, alloc in grant.placed:
            self.nodes[i].release(alloc)
            if log is not None:
                log.freed.append((self.nodes[i], alloc))
        self.cluster_dirty = True
        owned = grant.owned
        if owned is not None:
            pools = self.groups.get(owned.gid)
            if pools is not None:
                if log is not None:
                    log.removed.append((owned.gid, pools))
                self.groups[owned.gid] = None
                self.dirty_groups.add(owned.gid)

    def undo(self, log: Log) -> None:
        for gid, pools in log.removed:
            self.groups[gid] = pools
        for pool, alloc in log.freed:
            pool.take(alloc.other, alloc.gpus)

    def grantable(self, req: Request) -> bool:
        if req.group is not None:
            pools = self.groups.get(req.group.gid)
            if pools is None:
                return True  # its group goes: the request fails, its waiters go on
            res = req.shape.bundles[0]
            candidates = range(len(pools)) if req.bundle is None else (req.bundle,)
            return any(pools[b].fits(res) for b in candidates)
        placed = place(req.shape, self.nodes, self.order)
        if placed is None:
            return False
        undo(self.nodes, placed)
        return True


Key = tuple[object, object, object]


def request_key(req: Request) -> Key:
    # The broker shares one Shape per distinct shape: identity hashing is enough, and cheap.
    gid = req.group.gid if req.group is not None else None
    return (gid, req.bundle, req.shape)


def free_total(sim: Sim) -> Resources:
    """What is free on every node of the reduction."""
    total = Resources()
    for pool in sim.nodes:
        total = total + pool.free_resources()
    return total
