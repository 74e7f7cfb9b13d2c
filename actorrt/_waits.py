"""Who is awaiting whom: the record the resource broker reads to find blocked actors.

An edge ``waiter -> target`` exists while actor ``waiter`` awaits, with no timeout, an ask
to actor ``target`` (and, once resources exist, a resource request). DESIGN.md §4 "Blocked"
defines an actor as blocked when it awaits a resource request or an ask to a blocked actor;
this graph is the "ask" half of that definition.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

Listener = Callable[[Hashable, Hashable, bool], None]


class WaitGraph:
    """A multigraph of wait edges, counted so nested or concurrent awaits compose.

    ``listener(waiter, target, added)`` hears when a pair gets its first edge and when it
    loses its last: the runtime passes that on to the broker (or, in a worker, to the
    owning runtime's broker).
    """

    __slots__ = ("_edges", "listener")

    def __init__(self) -> None:
        self._edges: dict[Hashable, dict[Hashable, int]] = {}
        self.listener: Listener | None = None

    def add(self, waiter: Hashable, target: Hashable) -> None:
        targets = self._edges.setdefault(waiter, {})
        count = targets.get(target, 0)
        targets[target] = count + 1
        if count == 0 and self.listener is not None:
            self.listener(waiter, target, True)

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
        if self.listener is not None:
            self.listener(waiter, target, False)

    def waiting_on(self, waiter: Hashable) -> frozenset[Hashable]:
        """The targets ``waiter`` is awaiting right now."""
        return frozenset(self._edges.get(waiter, ()))

    def edges(self) -> list[tuple[Hashable, Hashable]]:
        """Every edge, once per distinct pair."""
        return [(w, t) for w, targets in self._edges.items() for t in targets]

    def forget(self, node: Hashable) -> None:
        """Drop every edge from ``node`` (it ended); the broker forgets it at release."""
        self._edges.pop(node, None)
