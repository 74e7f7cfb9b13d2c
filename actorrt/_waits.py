"""Who is awaiting whom: the record the resource broker reads to find blocked actors.

An edge ``waiter -> target`` exists while actor ``waiter`` awaits, with no timeout, an ask
to actor ``target`` (and, once resources exist, a resource request). DESIGN.md §4 "Blocked"
defines an actor as blocked when it awaits a resource request or an ask to a blocked actor;
this graph is the "ask" half of that definition.
"""

from __future__ import annotations

from collections.abc import Hashable


class WaitGraph:
    """A multigraph of wait edges, counted so nested or concurrent awaits compose."""

    __slots__ = ("_edges",)

    def __init__(self) -> None:
        self._edges: dict[Hashable, dict[Hashable, int]] = {}

    def add(self, waiter: Hashable, target: Hashable) -> None:
        targets = self._edges.setdefault(waiter, {})
        targets[target] = targets.get(target, 0) + 1

    def remove(self, waiter: Hashable, target: Hashable) -> None:
        targets = self._edges.get(waiter)
        if targets is None:
            return
        count = targets.get(target, 0) - 1
        if count > 0:
            targets[target] = count
            return
        targets.pop(target, None)
        if not targets:
            del self._edges[waiter]

    def waiting_on(self, waiter: Hashable) -> frozenset[Hashable]:
        """The targets ``waiter`` is awaiting right now."""
        return frozenset(self._edges.get(waiter, ()))

    def edges(self) -> list[tuple[Hashable, Hashable]]:
        """Every edge, once per distinct pair."""
        return [(w, t) for w, targets in self._edges.items() for t in targets]

    def forget(self, node: Hashable) -> None:
        """Drop every edge from ``node`` (it ended)."""
        self._edges.pop(node, None)
