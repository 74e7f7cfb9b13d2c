"""The cluster's pages, as the head serves them: every node (total, used and free
resources, liveness, the age of its last heartbeat), the drivers, every driver's gangs
with the node of each bundle, the pending requests of every driver with their reasons, and
the deadlock reports of the head's broker with their wait-for graphs.

The head knows holders by their ids (``DRIVER_ID/ACTOR_ID``), not by their classes: each
is named as the actor of its driver (``actor 3f2a.. of driver 9c1e (host, pid 4242)``). The
same data as ``actorrt status --address`` (``Head.status``), read on the head's loop;
nothing here changes state.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Protocol

from .._control._status import pending_view
from .._processes._scheduler import DRIVER
from ..resources import Broker
from ._state import deadlock_view, wait_edges

__all__ = ["HeadSource", "HeadState"]


class HeadSource(Protocol):
    """What the cluster's pages read of the head (``actorrt._cluster._head.Head``)."""

    broker: Broker
    head_id: str

    def status(self) -> dict[str, Any]:
        """What ``actorrt status --address`` shows (nodes with their heartbeats)."""
        ...

    def lost_nodes(self) -> list[dict[str, Any]]:
        """The nodes that left or were lost lately: ``node``, ``host``, ``at``, ``reason``."""
        ...

    def now(self) -> float:
        """The broker's clock (the head loop's time)."""
        ...


class HeadState:
    """The cluster's pages, each a plain dict of the same shape as a runtime's
    (:class:`~actorrt.dashboard._state.RuntimeState`), with the cluster's fields added."""

    def __init__(self, head: HeadSource) -> None:
        self.head = head
        self.started_at = time.time()

    # ------------------------------------------------------------ naming

    def _names(self, status: dict[str, Any]) -> dict[str, str]:
        return {
            d["runtime_id"]: f"driver {d['runtime_id']} ({d.get('host', '?')}, pid "
                             f"{d.get('pid', '?')})"
            for d in status["drivers"]
        }

    @staticmethod
    def _name(holder: object, drivers: dict[str, str]) -> str:
        driver, _, actor = str(holder).partition("/")
        of = drivers.get(driver, f"driver {driver} (gone)")
        if not actor or actor == DRIVER:
            return f"the driver program of {of}"
        return f"actor {actor} of {of}"

    # ------------------------------------------------------------ pages

    def summary(self) -> dict[str, Any]:
        status = self.head.status()
        return {
            "runtime_id": f"head {status['head_id']}",
            "pid": status["pid"],
            "started_at": self.started_at,
            "now": status["now"],
            "actor_counts": {},
            "pending": status["pending"],
            "deadlocks": len(self.head.broker.deadlock_reports),
            "cluster": True,
            "role": "head",
            "nodes": len(status["nodes"]),
            "drivers": len(status["drivers"]),
        }

    def resources(self) -> dict[str, Any]:
        status = self.head.status()
        broker, names = self.head.broker, self._names(status)
        total, available = status["total"], status["available"]
        groups = [
            {
                "id": str(info.group),
                "state": "reserved",
                "strategy": info.strategy,
                "holder": str(info.holder),
                "holder_name": self._name(info.holder, names),
                "bundles": [dict(b) for b in info.bundles],
                "free": [broker.bundle_available(info.group, i) for i in range(len(info.bundles))],
                "nodes": [str(n) for n in info.nodes],
                "members": [],
            }
            for info in broker.groups()
        ]
        return {
            "totals": {
                "total": total,
                "used": {k: round(v - available.get(k, 0.0), 6) for k, v in total.items()},
                "available": available,
            },
            "nodes": self._nodes(status),
            "groups": groups,
            "holders": [],
        }

    def actors(self) -> dict[str, Any]:
        # The head sees grants, not actors: each holder of resources, with its grants.
        status = self.head.status()
        names = self._names(status)
        broker = self.head.broker
        holders: Counter[str] = Counter()
        rows: list[dict[str, Any]] = []
        for holder in broker.holders():
            grants = broker.grants_of(holder)
            holders[str(holder).partition("/")[0]] += 1
            rows.append({
                "id": str(holder),
                "class": "",
                "name": self._name(holder, names),
                "where": ", ".join(sorted({str(p.node_id) for g in grants for p in g.placements})),
                "pid": None,
                "state": "running",
                "restarts": 0,
                "resources": _summed([p.resources.to_dict() for g in grants for p in g.placements]),
                "waiting_on": [],
            })
        return {"actors": rows, "counts": {"holding resources": len(rows)}}

    def nodes(self) -> dict[str, Any]:
        status = self.head.status()
        return {
            "nodes": self._nodes(status),
            "head": None,
            "cluster": {
                "head_id": status["head_id"],
                "address": status["address"],
                "drivers": [
                    {
                        "runtime_id": d["runtime_id"],
                        "host": d.get("host"),
                        "pid": d.get("pid"),
                        "joined": d["joined"],
                        "heard_s_ago": d.get("heard_s_ago"),
                    }
                    for d in status["drivers"]
                ],
            },
        }

    def waits(self) -> dict[str, Any]:
        status = self.head.status()
        names = self._names(status)
        broker = self.head.broker
        pending = [
            pending_view(p, lambda h: self._name(h, names))
            for p in broker.pending(now=self.head.now())
        ]
        wall = time.time() - self.head.now()  # the broker's clock to wall-clock time
        deadlocks = [
            deadlock_view(
                wall + report.at, report.kind, self._name(report.waiter, names),
                [self._name(h, names) for h in report.involved],
                None if report.parent is None else self._name(report.parent, names),
                report.message,
            )
            for report in reversed(broker.deadlock_reports)
        ]
        return {
            "pending": pending,
            "stalled": [p for p in pending if p["stalled"]],
            "graph": wait_edges(pending, []),
            "deadlocks": deadlocks,
        }

    def _nodes(self, status: dict[str, Any]) -> list[dict[str, Any]]:
        usage = {str(n): (total, free, draining)
                 for n, total, free, draining in self.head.broker.node_usage()}
        out: list[dict[str, Any]] = []
        for node in status["nodes"]:
            total, free, draining = usage.get(node["node_id"], ({}, {}, False))
            out.append({
                "node": node["node_id"],
                "host": node.get("host"),
                "state": "draining" if draining else (
                    "alive, loop stalled" if node.get("stalled_s") else "alive"),
                "heard_s_ago": node.get("heard_s_ago"),
                "joined": node.get("joined"),
                "total": total,
                "free": free,
                "used": {k: round(v - free.get(k, 0.0), 6) for k, v in total.items()},
                "lost": None,
            })
        for gone in self.head.lost_nodes():
            out.append({
                "node": gone["node"],
                "host": gone["host"],
                "state": "left" if gone["left"] else "lost",
                "heard_s_ago": None,
                "joined": None,
                "total": {},
                "free": {},
                "used": {},
                "lost": f"{gone['reason']} ({time.time() - gone['at']:.0f} s ago)",
            })
        return out


def _summed(parts: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = round(out.get(k, 0.0) + v, 6)
    return out
