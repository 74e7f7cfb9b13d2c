"""The runtime pages' data, built on the status snapshot (``actorrt._control._status``):
resources per node and the gangs that hold them, waits with the wait-for graph and the
deadlock reports, actors, nodes. Call on the runtime's loop; nothing here changes state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._control._status import HolderNames, StatusSource, snapshot
from .._processes._scheduler import NamedDeadlock

__all__ = ["Pages", "RuntimeState", "deadlock_view", "wait_edges"]


class Pages(Protocol):
    """The runtime pages' data, each a plain dict: a runtime's (:class:`RuntimeState`) or
    a cluster head's (``_head_state.HeadState``)."""

    def summary(self) -> dict[str, Any]: ...

    def resources(self) -> dict[str, Any]: ...

    def waits(self) -> dict[str, Any]: ...

    def actors(self) -> dict[str, Any]: ...

    def nodes(self) -> dict[str, Any]: ...


class RuntimeState:
    """One runtime's pages, each a plain dict (see docs/dashboard.md).

    Args:
        runtime: the runtime (a driver's).
        deadlocks: returns the deadlocks found and broken, oldest first, named
            (``_placement._scheduler.NamedDeadlock``).
        head: returns the cluster's head (``address``, ``head_id``, ``heard_s_ago``), or
            ``None`` on a runtime of this machine alone.
    """

    def __init__(
        self,
        runtime: StatusSource,
        deadlocks: Callable[[], Sequence[NamedDeadlock]],
        head: Callable[[], dict[str, Any] | None],
    ) -> None:
        self.runtime = runtime
        self.deadlocks = deadlocks
        self.head = head

    def summary(self) -> dict[str, Any]:
        snap = snapshot(self.runtime)
        return {
            "runtime_id": snap["runtime_id"],
            "pid": snap["pid"],
            "started_at": snap["started_at"],
            "now": snap["now"],
            "actor_counts": snap["actor_counts"],
            "pending": len(snap["pending"]),
            "deadlocks": len(self.deadlocks()),
            "cluster": self.head() is not None,
        }

    def resources(self) -> dict[str, Any]:
        snap = snapshot(self.runtime)
        return {
            "totals": snap["resources"],
            "nodes": self._nodes(),
            "groups": snap["placement_groups"],
            "holders": _holders(snap["actors"]),
        }

    def actors(self) -> dict[str, Any]:
        snap = snapshot(self.runtime)
        return {"actors": snap["actors"], "counts": snap["actor_counts"]}

    def nodes(self) -> dict[str, Any]:
        return {"nodes": self._nodes(), "head": self.head()}

    def waits(self) -> dict[str, Any]:
        snap = snapshot(self.runtime)
        names = HolderNames(self.runtime)
        asks = [
            (names.of(actor["id"]), target)
            for actor in snap["actors"]
            for target in actor["waiting_on"]
            if target != "resources"
        ]
        return {
            "pending": snap["pending"],
            "stalled": [req for req in snap["pending"] if req["stalled"]],
            "graph": wait_edges(snap["pending"], asks),
            "deadlocks": [
                deadlock_view(r.at, r.kind, r.waiter, list(r.involved), r.parent, r.message)
                for r in reversed(self.deadlocks())
            ],
        }

    def _nodes(self) -> list[dict[str, Any]]:
        usage = getattr(self.runtime.broker, "node_usage", None)
        if usage is None:  # a cluster driver: the head keeps the nodes' records
            return []
        return [
            {
                "node": str(node_id),
                "state": "draining" if draining else "alive",
                "total": total,
                "free": free,
                "used": {k: round(v - free.get(k, 0.0), 6) for k, v in total.items()},
            }
            for node_id, total, free, draining in usage()
        ]


def wait_edges(
    pending: list[dict[str, Any]], asks: list[tuple[str, str]]
) -> list[dict[str, str]]:
    """The wait-for graph now: each pending request to the holders of what it lacks (or to
    "(free resources)"), and each ``(asker, target)`` ask."""
    edges = [
        {"from": req["holder_name"], "to": holder, "kind": "resources"}
        for req in pending
        for holder in req["held_by"] or ["(free resources)"]
    ]
    edges += [{"from": a, "to": b, "kind": "ask"} for a, b in asks]
    return edges


def deadlock_view(
    at: float, kind: str, waiter: str, involved: list[str], parent: str | None, message: str
) -> dict[str, Any]:
    """One deadlock report as the page draws it: ``kind`` ``"asks"`` (a ring of asks,
    ``waiter`` first) or ``"resources"`` (``waiter`` waits on ``involved``; ``parent``
    awaits its start)."""
    if kind == "asks":
        ring = [waiter, *[h for h in involved if h != waiter]]
        edges = [
            {"from": a, "to": b, "kind": "ask"}
            for a, b in zip(ring, ring[1:] + ring[:1], strict=True)
        ]
    else:
        edges = [{"from": waiter, "to": h, "kind": "resources"} for h in involved if h != waiter]
        if parent is not None:
            edges.insert(0, {"from": parent, "to": waiter, "kind": "spawn"})
    return {
        "at": at, "kind": kind, "waiter": waiter, "parent": parent, "involved": involved,
        "graph": edges, "message": message,
    }


def _holders(actors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Who holds what: each actor with resources of its own or a bundle of a group."""
    return [
        {
            "id": a["id"],
            "class": a["class"],
            "name": a["name"],
            "resources": a["resources"],
            "group": a["group"],
            "parent": a["parent"],
        }
        for a in actors
        if a["resources"] or a["group"]
    ]
