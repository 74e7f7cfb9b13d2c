"""A runtime's state as plain data: what ``actorrt status`` shows.

:func:`snapshot` reads the runtime and its broker on the runtime's own loop and returns only
msgpack-able values (dicts, lists, strings, numbers, ``None``), so the status socket can send
it without pickling anything. Nothing here changes state. Holders and actors are named as
the rest of actorrt names them (``Worker(id=1a2b3c4d-5 name='w0')``), also inside the
pending reasons the broker writes with bare ids.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from .._placement._scheduler import DRIVER
from ..resources import UNIT
from ._discovery import process_start_time

if TYPE_CHECKING:
    from .._runtime import Runtime

__all__ = ["STATUS_FORMAT", "actor_state", "snapshot"]

STATUS_FORMAT = 1  # bumped when a field changes meaning; new fields may appear at any time

_ID = re.compile(r"[0-9a-f]{8}-\d+")


def snapshot(runtime: Runtime) -> dict[str, Any]:
    """Everything ``actorrt status`` shows about ``runtime``; call on the runtime's loop."""
    broker = runtime.grants.broker
    names = _Names(runtime)
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
    }


class _Names:
    """Holder ids as people read them."""

    def __init__(self, runtime: Runtime) -> None:
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

    def text(self, text: str) -> str:
        """``text`` with each actor id in it replaced by that actor's description."""
        return _ID.sub(
            lambda m: self.of(m.group(0)) if self._known(m.group(0)) else m.group(0), text
        )

    def _known(self, key: str) -> bool:
        return self.runtime.lookup(key) is not None or key in self.spawning


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


def _actors(runtime: Runtime, names: _Names) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pid = os.getpid()
    for actor_id, target in list(runtime._actors.items()):
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
        if actor_id in runtime._actors:
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


def _groups(runtime: Runtime, names: _Names, actors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    broker = runtime.grants.broker
    specs = runtime._group_specs
    members: dict[str, list[str]] = {}
    for actor in actors:
        if actor["group"] is not None:
            members.setdefault(actor["group"][0], []).append(names.of(actor["id"]))
    out: list[dict[str, Any]] = []
    for holder in [DRIVER, *runtime._actors]:
        for granted in broker.grants_of(holder):
            if granted.group is None:
                continue  # an actor's own resources, not a group reservation
            gid = granted.group
            spec = specs.get(gid)
            out.append(
                {
                    "id": str(gid),
                    "state": "reserved",
                    "strategy": spec[1] if spec else None,
                    "holder": str(holder),
                    "holder_name": names.of(holder),
                    "bundles": [p.resources.to_dict() for p in granted.placements],
                    "free": [
                        broker.bundle_available(gid, i) for i in range(len(granted.placements))
                    ],
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


def _pending(runtime: Runtime, names: _Names) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for req in runtime.pending_requests():
        out.append(
            {
                "request_id": str(req.request_id),
                "holder": str(req.holder),
                "holder_name": names.of(req.holder),
                "kind": "placement group" if req.strategy is not None else "actor",
                "bundles": [dict(b) for b in req.bundles],
                "strategy": req.strategy,
                "queue": str(req.queue),
                "waited_s": float(req.waited_s),
                "short_of": dict(req.short_of),
                "held_by": [names.of(h) for h in req.held_by],
                "reserved": bool(req.reserved),
                "behind": [str(r) for r in req.behind],
                "stalled": bool(req.stalled),
                "reason": names.text(str(req.reason)),
            }
        )
    return out
