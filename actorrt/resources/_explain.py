"""Pending, explained: why each waiting request waits.

For each waiting request the report says what it is short of where it comes closest to fitting
(the node, or the bundle of its group, that needs the least more; for a multi-bundle gang, what
the whole cluster lacks), who holds that (named as the runtime names them: class, id and name),
where it stands in line when it holds a reservation, whether reservations of the requests ahead
of it are all that keep it waiting, and how long its queue has gone without a grant. Waiting
behind holders is ordinary queueing and reads so; only a request that an actor awaits while its
queue makes no progress is called stalled (that actor may hold what others need). Amounts are
compared with reservations given back, because reserved amounts are free in fact.

This is a diagnostic: it costs time linear in waiting requests and nodes (answers are shared by
requests of one shape), and nothing on the broker's hot path calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from ._node import NodeInventory
from ._placement import place, undo
from ._pool import ResourcePool
from ._queue import ClusterQueue
from ._spec import GPU, UNIT, Resources, format_amount
from ._state import Grant, Group, Request

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


def place_in_line(queue: ClusterQueue, req: Request) -> int | None:
    """Where ``req`` stands among the requests that hold reservations (1: next), or ``None``
    when it holds none."""
    if req.rid not in queue.reservations:
        return None
    mine = (req.key, req.seq)
    older = (r.request for r in queue.reservations.values())
    return 1 + sum(1 for r in older if (r.key, r.seq) < mine)


def set_aside_for(queue: ClusterQueue, req: Request) -> tuple[Request, ...]:
    """The other requests whose reservations keep ``req`` waiting, oldest first."""
    others = [r.request for r in queue.reservations.values() if r.request.rid != req.rid]
    return tuple(sorted(others, key=lambda r: (r.key, r.seq)))


def _ordinal(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_HOLDERS])
    more = len(names) - _MAX_HOLDERS
    return shown if more <= 0 else f"{shown} and {more} more"


def reason_text(
    *,
    short: Mapping[str, int],
    held_by: Sequence[Hashable],
    fits: bool,
    line: int | None,
    set_aside: Sequence[Request],
    awaited: bool,
    idle_s: float | None,
    name: Callable[[Hashable], str] = str,
) -> str:
    """One sentence: why a request waits, holders named by ``name``.

    Args:
        short: what it lacks where it comes closest to fitting, in units.
        held_by: holders of that.
        fits: it would fit if no reservation were held.
        line: its place among the reserved requests (1: next), ``None`` when it holds none.
        set_aside: the other reserved requests, oldest first (they matter when ``fits``).
        awaited: an actor awaits it (a spawn inside an actor, a ``ready()``).
        idle_s: seconds with no grant in its queue, when that passed the stall threshold.
        name: how to name a holder for users (the runtime passes class, id and name).
    """
    parts = []
    if fits and set_aside:
        whose = _listed([f"request {r.rid} of {name(r.holder)}" for r in set_aside])
        which = "the request" if len(set_aside) == 1 else "the requests"
        parts.append(f"what it needs is free, but set aside for {which} ahead of it: {whose}")
    elif fits:
        parts.append("what it needs is free: the broker's next pass grants it")
    elif short:
        who = _listed([name(h) for h in held_by])
        if who:
            parts.append(f"waiting for {format_units(short)} more, held by {who}")
        else:
            parts.append(
                f"waiting for {format_units(short)} more; what is free is split "
                "across nodes or devices, none of which has that"
            )
    else:
        parts.append(
            "enough is free in total, but no node (or GPU) has it in the arrangement its "
            "strategy needs; it waits until one does"
        )
    if line == 1:
        parts.append("it is next in line: what frees there is set aside for it")
    elif line is not None and fits and set_aside:
        parts.append(f"it is {_ordinal(line)} in line")
    elif line is not None:
        ahead = "the request" if line == 2 else f"the {line - 1} requests"
        parts.append(
            f"it is {_ordinal(line)} in line: what frees there is set aside for it once "
            f"{ahead} ahead of it {'has its share' if line == 2 else 'have theirs'}"
        )
    if idle_s is not None:
        if awaited:
            parts.append(
                f"stalled: nothing granted in its queue for {idle_s:.1f} s while an actor awaits it"
            )
        else:
            parts.append(f"no grant in its queue for {idle_s:.1f} s: the holders still run")
    return "; ".join(parts)
