"""A runtime's state as plain data: what ``actorrt status`` shows.

:func:`snapshot` reads the runtime and its broker on the runtime's own loop and returns only
msgpack-able values (dicts, lists, strings, numbers, ``None``), so the status socket can send
it without pickling anything. Nothing here changes state. Holders and actors are named as
the rest of actorrt names them (``Worker(id=1a2b3c4d-5 name='w0')``), as the pending
reasons the runtime hands out already do.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .._core._waits import WaitGraph
from .._processes._scheduler import DRIVER
from ..resources import UNIT, Broker, PendingRequest
from ._discovery import process_start_time

__all__ = [
    "STATUS_FORMAT", "HolderNames", "StatusSource", "actor_state", "pending_view", "snapshot",
]


class StatusSource(Protocol):
    """What a status snapshot reads of a runtime (the driver program's)."""

    @property
    def runtime_id(self) -> str: ...

    @property
    def started_at(self) -> float | None: ...

    @property
    def broker(self) -> Broker:
        """The resource broker (read only)."""
        ...

    @property
    def waits(self) -> WaitGraph: ...

    def actors(self) -> Mapping[str, Any]:
        """Live actors by id."""
        ...

    def lookup(self, actor_id: str) -> Any: ...

    def spawning(self) -> dict[str, tuple[str, str | None, str | None]]:
        """Spawns waiting for resources: actor id -> (class name, name, parent id)."""
        ...

    def pending_requests(self) -> list[PendingRequest]: ...

    def relayed(self) -> dict[str, int]:
        """Calls and tells passed on between two worker processes, since the start."""
        ...

STATUS_FORMAT = 1  # bumped when a field changes meaning; new fields may appear at any time


def snapshot(runtime: StatusSource) -> dict[str, Any]:
    """Everything ``actorrt status`` shows about ``runtime``; call on the runtime's loop."""
    broker = runtime.broker
    names = HolderNames(runtime)
    actors = _actors(runtime, names)
    total = broker.total()
    available = broker.available()
    return {
        "format": STATUS_FORMAT,
        "pid": os.getpid(),
        "proc_start": process_start_time(os.getpid()),
        "runtime_id": runtime.runtime_id,
        "started_at": runtime.started_at,
        "now": time.time(),
        "resources": {
            "total": total,
            "used": {k: v - available.get(k, 0.0) for k, v in total.items()},
            "available": available,
            "gpus": [
                {
                    "node": str(node.node_id),
                    "id": gpu_id,
                    "capacity": cap / UNIT,
                    "free": free / UNIT,
                }
                for node in broker.nodes
                for gpu_id, cap, free in zip(
                    node.gpu_ids, node.gpu_capacity, node.gpu_free, strict=True
                )
            ],
        },
        "placement_groups": _groups(runtime, names, actors),
        "pending": _pending(runtime, names),
        "actors": actors,
        "actor_counts": dict(Counter(a["state"] for a in actors)),
        "relayed": runtime.relayed(),
    }


class HolderNames:
    """Holder ids as people read them."""

    def __init__(self, runtime: StatusSource) -> None:
        self.runtime = runtime
        self.spawning = runtime.spawning()

    def of(self, holder: object) -> str:
        if holder == DRIVER:
            return "driver program"
        key = str(holder)
        target = self.runtime.lookup(key)
        if target is not None:
            return str(target.describe())
        pending = self.spawning.get(key)
        if pending is not None:
            cls_name, name, _parent = pending
            named = f" name={name!r}" if name else ""
            return f"{cls_name}(id={key}{named}, being spawned)"
        return key


def actor_state(target: Any) -> str:
    """``starting``, ``running``, ``unresponsive`` (its worker process is stopped or does not
    answer), ``restarting``, ``stopping`` or ``dead``."""
    state = getattr(target, "state", None)  # a worker-process actor keeps its own
    if isinstance(state, str):
        if _frozen(target) is not None and state in ("running", "stopping"):
            return "unresponsive"
        return str(state)  # the plain value of a lifecycle State (a str enum)
    if target.died.done():
        return "dead"
    if not target.accepting:
        return "stopping"
    if target.instance is None:
        return "restarting" if target.restart_count else "starting"
    return "running"


def _frozen(target: Any) -> str | None:
    """How the actor's worker process is frozen (``"stopped by a signal ... for 3 s"``)."""
    worker = getattr(target, "worker", None)
    liveness = getattr(worker, "liveness", None)
    return liveness.describe() if liveness is not None else None


def _actors(runtime: StatusSource, names: HolderNames) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pid = os.getpid()
    for actor_id, target in list(runtime.actors().items()):
        worker = getattr(target, "worker", None)
        grant_info = getattr(target, "grant_info", None)
        parent = getattr(target, "parent", None)
        mailbox = getattr(target, "mailbox", None)
        out.append(
            {
                "id": actor_id,
                "name": target.name,
                "class": target.cls_name,
                "where": "inline" if target.inline else "process",
                "pid": pid if target.inline else (worker.pid if worker is not None else None),
                "state": actor_state(target),
                "parent": parent.actor_id if parent is not None else None,
                "resources": dict(grant_info[0]) if grant_info else {},
                "group": _group_of(target),
                "restarts": int(getattr(target, "restart_count", 0)),
                "queued": len(mailbox) if mailbox is not None else None,
                "waiting_on": sorted(names.of(t) for t in runtime.waits.waiting_on(actor_id)),
                "unresponsive": _frozen(target),
            }
        )
    for actor_id, (cls_name, name, parent_id) in names.spawning.items():
        if runtime.lookup(actor_id) is not None:
            continue  # granted: its constructor runs
        out.append(
            {
                "id": actor_id,
                "name": name,
                "class": cls_name,
                "where": None,
                "pid": None,
                "state": "pending",
                "parent": parent_id,
                "resources": {},
                "group": None,
                "restarts": 0,
                "queued": None,
                "waiting_on": ["resources"],
                "unresponsive": None,
            }
        )
    return out


def _group_of(target: Any) -> list[Any] | None:
    grant = getattr(target, "grant", None)
    if grant is None or grant.placement.group is None:
        return None
    return [str(grant.placement.group), grant.placement.bundle_index]


def _groups(
    runtime: StatusSource, names: HolderNames, actors: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    broker = runtime.broker
    members: dict[str, list[str]] = {}
    for actor in actors:
        if actor["group"] is not None:
            members.setdefault(actor["group"][0], []).append(names.of(actor["id"]))
    out: list[dict[str, Any]] = []
    for info in broker.groups():
        gid, holder = info.group, info.holder
        out.append(
            {
                "id": str(gid),
                "state": "reserved",
                "strategy": info.strategy,
                "holder": str(holder),
                "holder_name": names.of(holder),
                "bundles": [dict(bundle) for bundle in info.bundles],
                "free": [broker.bundle_available(gid, i) for i in range(len(info.bundles))],
                "members": sorted(members.get(str(gid), [])),
            }
        )
    for req in runtime.pending_requests():
        if req.strategy is None:
            continue  # an actor's own request, listed under pending
        out.append(
            {
                "id": str(req.request_id),
                "state": "pending",
                "strategy": req.strategy,
                "holder": str(req.holder),
                "holder_name": names.of(req.holder),
                "bundles": [dict(b) for b in req.bundles],
                "free": None,
                "members": [],
            }
        )
    return out


def _pending(runtime: StatusSource, names: HolderNames) -> list[dict[str, Any]]:
    return [pending_view(req, names.of) for req in runtime.pending_requests()]


def pending_view(req: PendingRequest, name: Callable[[object], str]) -> dict[str, Any]:
    """One waiting request as plain data, its holders named by ``name``."""
    return {
        "request_id": str(req.request_id),
        "holder": str(req.holder),
        "holder_name": name(req.holder),
        "kind": "placement group" if req.strategy is not None else "actor",
        "bundles": [dict(b) for b in req.bundles],
        "strategy": req.strategy,
        "queue": str(req.queue),
        "waited_s": float(req.waited_s),
        "short_of": dict(req.short_of),
        "held_by": [name(h) for h in req.held_by],
        "reserved": bool(req.reserved),
        "behind": [str(r) for r in req.behind],
        "stalled": bool(req.stalled),
        "reason": str(req.reason),  # the runtime names its actors there already
    }
