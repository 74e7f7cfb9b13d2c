"""The head's broker, as a driver's scheduler calls it (cluster mode).

The scheduler calls a :class:`RemoteBroker` as it would call a broker of its own; it
forwards each call to the head (``Claim``, ``Withdraw``, ``ReleaseHolder``, ``SetParent``,
``Blocked``), every id prefixed with the driver's runtime id and ``/``, and returns no
events. The head's answers (``Grant``, ``Deny``, ``Revoke``, ``Deadlocked``, ``Stall``) come
back through :class:`~actorrt._cluster._link.ClusterLink` as the broker's own events, ids
unprefixed, and go to the scheduler. What the scheduler reads at once (a group's bundles,
the resource views) is kept here from what the head sent last.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol

from .._errors import DriverDroppedError, HeadLostError, ResourceError
from .._wire._connection import Connection, ConnectionLostError
from .._wire._messages import (
    Blocked,
    Claim,
    Deadlocked,
    Deny,
    Grant,
    ReleaseHolder,
    Revoke,
    SetParent,
    Stall,
    View,
    Withdraw,
)
from ..resources import (
    AskDeadlocked,
    BundlePlacement,
    Event,
    Failed,
    Granted,
    GroupInfo,
    GroupTarget,
    PendingRequest,
    Resources,
    Revoked,
    Stalled,
    parse_resources,
)

__all__ = ["HeadSide", "RemoteBroker"]


class HeadSide(Protocol):
    """What the stand-in needs of the driver's link: its id and its connection to the head."""

    runtime_id: str

    @property
    def head(self) -> Connection: ...

    def head_broken(self, error: ConnectionLostError) -> None:
        """Called when a send finds the head's connection ended; sets ``lost``."""


class RemoteBroker:
    """The head's broker, as this driver's scheduler calls it (see the module docstring)."""

    def __init__(self, link: HeadSide) -> None:
        self.link = link
        self.prefix = link.runtime_id + "/"
        self.deliver: Any = None  # the scheduler's deliver(events), set by the driver role
        self.lost: HeadLostError | DriverDroppedError | None = None
        self._claims: dict[str, tuple[str, Any]] = {}  # waiting: request id -> holder, spec
        self._groups: dict[str, GroupInfo] = {}
        self._total: dict[str, float] = {}
        self._available: dict[str, float] = {}
        self._pending: list[PendingRequest] = []

    # ------------------------------------------------------------ ids

    def _out(self, value: Hashable | None) -> str | None:
        return None if value is None else self.prefix + str(value)

    def _in(self, value: str | None) -> str | None:
        if value is None:
            return None
        return value[len(self.prefix):] if value.startswith(self.prefix) else value

    def _text(self, error: BaseException) -> BaseException:
        """The head's error, its ids unprefixed (the scheduler names the actors)."""
        text = str(error)
        if self.prefix not in text:
            return error
        try:
            clean = type(error)(text.replace(self.prefix, ""))
        except Exception:
            return error
        clean.__cause__ = error.__cause__
        return clean

    # ---------------------------------------------------- the broker's inputs

    def request(
        self,
        request_id: Hashable,
        holder: Hashable,
        resources: Mapping[str, object] | Resources | None = None,
        *,
        bundles: Sequence[Mapping[str, object] | Resources] | None = None,
        strategy: str = "PACK",
        placement: object = "auto",
        parent: Hashable | None = None,
        allow_empty_head: bool = False,
        now: float | None = None,
    ) -> list[Event]:
        if self.lost is not None:
            raise self.lost
        rid = str(request_id)
        spec = None if resources is None else _as_dict(resources)
        specs = None if bundles is None else [_as_dict(b) for b in bundles]
        where: Any = placement
        if isinstance(placement, GroupTarget):
            where = [self._out(placement.group), placement.bundle]
        elif placement not in ("auto", "cluster"):
            where = placement.target() if hasattr(placement, "target") else placement
            if isinstance(where, GroupTarget):
                where = [self._out(where.group), where.bundle]
        try:
            reply = self.link.head.request(Claim(
                self.prefix + rid, self.prefix + str(holder), spec, specs, str(strategy), where,
                self._out(parent), allow_empty_head,
            ))
        except ConnectionLostError as exc:  # ended before anyone noticed: the head is lost
            self.link.head_broken(exc)
            raise self.lost or HeadLostError(f"the cluster's head is lost: {exc}") from exc
        self._claims[rid] = (str(holder), (specs, str(strategy), not isinstance(where, list)))
        reply.add_done_callback(lambda done: self._claimed(rid, str(holder), done))
        return []

    def _claimed(self, rid: str, holder: str, done: asyncio.Future[Any]) -> None:
        if done.cancelled() or done.exception() is None:
            return
        self._claims.pop(rid, None)
        error = done.exception()
        if not isinstance(error, ResourceError):
            error = ResourceError(f"the cluster's head refused request {rid}: {error}")
        self._deliver([Failed(rid, holder, self._text(error))])  # type: ignore[arg-type]

    def cancel(self, request_id: Hashable, *, now: float | None = None) -> list[Event]:
        rid = str(request_id)
        self._claims.pop(rid, None)
        self._groups.pop(rid, None)
        self._notify(Withdraw(self.prefix + rid))
        return []

    def release(self, holder: Hashable, *, now: float | None = None) -> list[Event]:
        key = str(holder)
        for rid, (who, _) in list(self._claims.items()):
            if who == key:
                del self._claims[rid]
        for gid, info in list(self._groups.items()):
            if info.holder == key:
                del self._groups[gid]
        self._notify(ReleaseHolder(self.prefix + key))
        return []

    def waiting_of(self, holder: Hashable) -> list[Hashable]:
        return [rid for rid, (who, _) in self._claims.items() if who == str(holder)]

    def set_parent(self, holder: Hashable, parent: Hashable) -> None:
        self._notify(SetParent(self.prefix + str(holder), self.prefix + str(parent)))

    def blocked(
        self,
        holder: Hashable,
        *,
        on_request: Hashable | None = None,
        on_holder: Hashable | None = None,
        serial: bool = True,
        now: float | None = None,
    ) -> None:
        self._notify(Blocked(self.prefix + str(holder), self._out(on_request),
                             self._out(on_holder), serial, True))

    def unblocked(
        self,
        holder: Hashable,
        *,
        on_request: Hashable | None = None,
        on_holder: Hashable | None = None,
        now: float | None = None,
    ) -> None:
        self._notify(Blocked(self.prefix + str(holder), self._out(on_request),
                             self._out(on_holder), True, False))

    def next_poll_at(self) -> float | None:
        return None  # the head runs the broker's timers

    def poll(self, now: float) -> list[Event]:
        return []

    def add_node(self, node: object, *, now: float | None = None) -> list[Event]:
        raise ResourceError("in a cluster, nodes join with `actorrt start --address`")

    def remove_node(self, node_id: Hashable, *, now: float | None = None) -> list[Event]:
        raise ResourceError("in a cluster, a node leaves with `actorrt stop` on its machine")

    node_lost = remove_node

    def _notify(self, message: Any) -> None:
        head = self.link.head
        if self.lost is None and not head.is_closing():
            head.notify(message)

    # -------------------------------------------------------------- reports

    def group_info(self, group: Hashable) -> GroupInfo | None:
        return self._groups.get(str(group))

    def groups(self) -> list[GroupInfo]:
        return list(self._groups.values())

    def bundle_available(self, group: Hashable, bundle: int) -> dict[str, float]:
        return {}  # kept by the head (`actorrt status --address`)

    @property
    def nodes(self) -> tuple[Any, ...]:
        return ()

    def total(self) -> dict[str, float]:
        return dict(self._total)

    def available(self) -> dict[str, float]:
        return dict(self._available)

    def pending(
        self, *, now: float | None = None, name: Callable[[Hashable], str] = str
    ) -> list[PendingRequest]:
        """The head's last view of the waiting requests; in each reason, the holders it
        lists are named by ``name``."""
        return [p._replace(reason=_named(p, name)) for p in self._pending]

    # ----------------------------------------------------------- from the head

    def _deliver(self, events: list[Event]) -> None:
        if self.deliver is not None:
            self.deliver(events)

    def granted(self, msg: Grant) -> None:
        rid = self._in(msg.request_id) or ""
        holder = self._in(msg.holder) or ""
        claim = self._claims.pop(rid, None)
        placements = tuple(
            BundlePlacement(
                node, parse_resources(spec), tuple((str(g), float(s)) for g, s in gpus),
                self._in(group), index,
            )
            for node, spec, gpus, group, index in msg.placements
        )
        group = self._in(msg.group)
        if claim is not None and claim[1][2]:
            self._draw(placements)
        if group is not None and claim is not None:
            specs, strategy, _ = claim[1]
            self._groups[group] = GroupInfo(
                group, holder, tuple(specs or ()), strategy, tuple(p.node_id for p in placements)
            )
        self._deliver([Granted(rid, holder, placements, group)])

    def _draw(self, placements: tuple[BundlePlacement, ...]) -> None:
        """Takes a grant's bundles off the head's last view of what is free, so that
        ``available_resources()`` agrees with a grant as soon as it is known here; the
        head's next view, sent after the grant on the same connection, replaces it."""
        for placement in placements:
            for name, amount in placement.resources.to_dict().items():
                if name in self._available:
                    self._available[name] = max(0.0, self._available[name] - amount)

    def denied(self, msg: Deny) -> None:
        rid = self._in(msg.request_id) or ""
        self._claims.pop(rid, None)
        error = self._text(msg.error)
        if not isinstance(error, ResourceError):
            error = ResourceError(str(error))
        self._deliver([Failed(rid, self._in(msg.holder), error)])

    def revoked(self, msg: Revoke) -> None:
        group = self._in(msg.group)
        if group is not None and msg.request_id == msg.group:
            self._groups.pop(group, None)
        self._deliver([Revoked(self._in(msg.request_id), self._in(msg.holder), group, msg.node)])

    def deadlocked(self, msg: Deadlocked) -> None:
        self._deliver([AskDeadlocked(self._in(msg.waiter), self._in(msg.target),
                                     self._text(msg.error))])  # type: ignore[arg-type]

    def stalled(self, msg: Stall) -> None:
        reason = msg.reason.replace(self.prefix, "")
        self._deliver([Stalled(self._in(msg.request_id), self._in(msg.holder), reason)])

    def view(self, msg: View) -> None:
        self._total = dict(msg.total)
        self._available = dict(msg.available)
        self._pending = [
            PendingRequest(
                self._in(rid), self._in(holder), tuple(dict(b) for b in bundles), strategy,
                self._in(queue), float(waited), dict(short), tuple(self._in(h) for h in held),
                bool(reserved), tuple(self._in(b) for b in behind), bool(stalled),
                str(reason).replace(self.prefix, ""),
            )
            for (rid, holder, bundles, strategy, queue, waited, short, held, reserved,
                 behind, stalled, reason) in msg.pending
        ]

    def head_lost(self, error: HeadLostError | DriverDroppedError) -> None:
        """Fail every request still waiting, and every later one."""
        self.lost = error
        waiting, self._claims = self._claims, {}
        self._deliver([Failed(rid, holder, error) for rid, (holder, _) in waiting.items()])


def _as_dict(value: Mapping[str, object] | Resources) -> dict[str, float]:
    if isinstance(value, Resources):
        return dict(value.to_dict())
    return {str(k): float(v) for k, v in value.items()}  # type: ignore[arg-type]


def _named(p: PendingRequest, name: Callable[[Hashable], str]) -> str:
    text = p.reason
    for holder in {p.holder, *p.held_by}:
        said = name(holder)
        if said != str(holder):
            text = re.sub(rf"(?<![\w=-]){re.escape(str(holder))}(?![\w-])", said, text)
    return text
