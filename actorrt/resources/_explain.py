"""Pending, explained: why each waiting request waits.

For each waiting request the report says what it is short of where it comes closest to fitting
(the node, or the bundle of its group, that needs the least more; for a multi-bundle gang, what
the whole cluster lacks), who holds that, whether it holds a reservation, whether reservations of
older requests are all that keep it waiting, and whether its queue has stalled. Amounts are
compared with reservations given back, because reserved amounts are free in fact.

This is a diagnostic: it costs time linear in waiting requests and nodes (answers are shared by
requests of one shape), and nothing on the broker's hot path calls it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

from ._node import NodeInventory
from ._placement import place, undo
from ._pool import ResourcePool
from ._queue import ClusterQueue
from ._spec import GPU, UNIT, Resources, format_amount
from ._state import Grant, Group, Request, WaitQueue

__all__ = ["Explainer"]

_MAX_HOLDERS = 5


class Explainer:
    """Builds :class:`PendingRequest`-ready facts for the waiting requests of one moment."""

    def __init__(
        self,
        nodes: Sequence[NodeInventory],
        queue: ClusterQueue,
        grants: Iterable[Grant],
        order: Sequence[int],
    ) -> None:
        self._queue = queue
        self._order = order
        self._free = [n.copy() for n in nodes]
        for res in queue.reservations.values():
            for node, other, gpus in res.parts:
                pool = self._free[node]
                for k, v in other:
                    pool.free[k] += v
                for d, v in gpus:
                    pool.gpu_free[d] += v
        self._on_node: dict[int, list[tuple[Hashable, Resources]]] = {}
        for grant in grants:  # every grant, not every holder: most holders only wait
            if grant.group is None:
                for (i, _), b in zip(grant.placed, grant.shape.bundles, strict=True):
                    self._on_node.setdefault(i, []).append((grant.holder, b))
        self._by_shape: dict[object, tuple[dict[str, int], tuple[Hashable, ...], bool]] = {}

    def cluster(self, req: Request) -> tuple[dict[str, int], tuple[Hashable, ...], bool]:
        """``(short_of units, held_by, fits_without_reservations)`` for a cluster request."""
        known = self._by_shape.get(req.shape.key)
        if known is None:
            known = self._by_shape[req.shape.key] = self._cluster(req)
        return known

    def _cluster(self, req: Request) -> tuple[dict[str, int], tuple[Hashable, ...], bool]:
        placed = place(req.shape, self._free, self._order)
        if placed is not None:
            undo(self._free, placed)
            return {}, (), True
        if len(req.shape.bundles) == 1:
            best: tuple[float, int, dict[str, int]] | None = None
            for i, pool in enumerate(self._free):
                if not pool.fits_capacity(req.shape.bundles[0]):
                    continue
                short = shortage(req.shape.bundles[0], pool)
                score = sum(v / max(1, req.shape.bundles[0].units(k)) for k, v in short.items())
                if best is None or score < best[0]:
                    best = (score, i, short)
            if best is None:
                return {}, (), False
            _, node, short = best
            return short, self._holders_of(short, [node]), False
        total = req.shape.total
        free = Resources()
        for pool in self._free:
            free = free + pool.free_resources()
        short = {k: v - free.units(k) for k, v in total.items_units() if v > free.units(k)}
        return short, self._holders_of(short, list(self._on_node)), False

    def _holders_of(self, short: Mapping[str, int], nodes: list[int]) -> tuple[Hashable, ...]:
        amounts: dict[Hashable, int] = {}
        for i in nodes:
            for hid, res in self._on_node.get(i, ()):
                got = sum(res.units(k) for k in short)
                if got:
                    amounts[hid] = amounts.get(hid, 0) + got
        ranked = sorted(amounts, key=lambda h: (-amounts[h], repr(h)))
        return tuple(ranked[:_MAX_HOLDERS])

    def group(self, req: Request, group: Group) -> tuple[dict[str, int], tuple[Hashable, ...]]:
        """``(short_of units, held_by)`` for a request waiting inside a group."""
        res = req.shape.bundles[0]
        candidates = range(len(group.pools)) if req.bundle is None else (req.bundle,)
        best: tuple[float, int, dict[str, int]] | None = None
        for b in candidates:
            short = shortage(res, group.pools[b])
            score = sum(v / max(1, res.units(k)) for k, v in short.items())
            if best is None or score < best[0]:
                best = (score, b, short)
        if best is None:
            return {}, ()
        _, b, short = best
        holders = [
            g.holder
            for g in group.members.values()
            if g.placed[0][0] == b and g.holder != req.holder
        ]
        return short, tuple(sorted(set(holders), key=repr)[:_MAX_HOLDERS])


def shortage(res: Resources, pool: ResourcePool) -> dict[str, int]:
    """What ``res`` lacks in ``pool`` now, in units (GPU under the per-device rules)."""
    short = {k: v - pool.free.get(k, 0) for k, v in res.other_units if v > pool.free.get(k, 0)}
    g = res.gpu_units
    if g and g < UNIT:
        best = max(pool.gpu_free, default=0)
        if best < g:
            short[GPU] = g - best
    elif g:
        whole = sum(1 for f in pool.gpu_free if f >= UNIT)
        if whole * UNIT < g:
            short[GPU] = g - whole * UNIT
    return short


def format_units(amounts: Mapping[str, int]) -> str:
    """``"{CPU: 1, GPU: 0.5}"`` for a units dict."""
    inner = ", ".join(f"{k}: {format_amount(k, v)}" for k, v in sorted(amounts.items()))
    return "{" + inner + "}"


def reason_text(
    *,
    short: Mapping[str, int],
    held_by: Sequence[Hashable],
    reserved: bool,
    behind: Sequence[Hashable],
    stalled: bool,
    waits: WaitQueue,
    now: float,
) -> str:
    """One sentence: why a request waits."""
    parts = []
    if behind:
        ids = ", ".join(repr(r) for r in behind[:_MAX_HOLDERS])
        parts.append(f"what it needs is free but reserved for older request(s) {ids}")
    elif short:
        who = ", ".join(str(h) for h in held_by) or "nobody (fragmented across nodes or devices)"
        parts.append(f"short of {format_units(short)}, held by {who}")
    else:
        parts.append("enough is free in total, but not in the arrangement it needs")
    if reserved:
        parts.append("it holds a reservation (first in line), so what frees there is kept for it")
    if stalled:
        idle = now - waits.last_progress
        parts.append(f"stalled: nothing granted in its queue for {idle:.1f} s")
    return "; ".join(parts)
