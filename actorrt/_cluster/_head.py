"""The cluster's head: its one broker, and the registry of its nodes and drivers.

Node agents join with what their machine has (:class:`~actorrt._wire._messages.JoinNode`);
drivers connect (``JoinDriver``) and send their resource requests, releases, parents and
wait edges, each id prefixed with the driver's runtime id and ``/`` so that drivers never
mix. The broker's events go back to the driver whose id they carry. Every
:data:`BEAT` seconds the head and each peer tell each other they are alive (a peer's UDP
beats come from a thread of its own, so a peer whose event loop is busy stays heard: see
:mod:`._beats`); a peer silent for :data:`LOST_AFTER` seconds, or whose connection closed
without a ``Leave``, is lost, and the head logs why at WARNING (a peer dropped for its
silence is sent a ``Leave`` saying so first); a peer that sent ``Leave`` left (INFO):

- a node: the broker's ``node_lost`` ends every grant on it (its drivers hear ``NodeDown``
  first, then a ``Revoke`` per grant), and requests no node left can hold fail;
- a driver: everything its ids hold is released.

The head holds no actor and unpickles no user class: it sees resource amounts and ids
only. It is not fault tolerant: when it goes, drivers and nodes notice within
:data:`LOST_AFTER` seconds and say so (docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Hashable
from typing import Any

from .._core._handle import EDGE_DELAY
from .._processes._scheduler import DEADLOCK_DELAY, BrokerClock
from .._wire import _tls
from .._wire._connection import Connection, ConnectionLostError
from .._wire._dispatcher import Dispatcher, notification, request
from .._wire._messages import (
    Beat,
    Blocked,
    Claim,
    ClusterStatus,
    Deadlocked,
    Deny,
    Grant,
    JoinDriver,
    JoinNode,
    Leave,
    NodeDown,
    NodeUp,
    ReleaseHolder,
    Revoke,
    SetParent,
    Stall,
    View,
    Withdraw,
)
from .._wire._transport import WireServer, serve_tcp
from ..resources import (
    AskDeadlocked,
    Broker,
    Event,
    Failed,
    Granted,
    GroupTarget,
    NodeInventory,
    Revoked,
    Stalled,
)
from ._beats import BeatServer, LoopWatch, open_beat_server

__all__ = ["BEAT", "LOST_AFTER", "Head", "placement_wire"]

logger = logging.getLogger("actorrt")

BEAT = 0.5  # seconds between two "still here" messages, both ways (TCP and UDP: _beats)
LOST_KEPT = 32  # the nodes lost lately that the dashboard lists
LOST_AFTER = 2.0  # seconds of silence after which a peer is gone (so reported within 3 s)
VIEW_DELAY = 0.02  # seconds over which resource views to drivers are coalesced
CLOSE_GRACE = 5.0  # seconds a dropped peer's connection may take to send its Leave


class Peer:
    """One connection to the head: a node agent or a driver."""

    __slots__ = ("conn", "holders", "id", "info", "joined", "kind", "last_seen", "leaving",
                 "stalled")

    def __init__(self, conn: Connection, kind: str, peer_id: str, info: dict[str, Any]) -> None:
        self.conn = conn
        self.kind = kind  # "node" or "driver"
        self.id = peer_id
        self.info = info
        self.joined = time.time()
        self.last_seen = time.monotonic()
        self.holders: set[str] = set()  # a driver's holder ids, released when it goes
        self.leaving: str | None = None  # the reason its Leave gave
        self.stalled = 0.0  # how long its loop had not run, as its last beat said

    def describe(self) -> str:
        if self.kind == "node":
            return f"node {self.id} ({self.info['host']})"
        return f"driver {self.id} ({self.info['host']}, pid {self.info['pid']})"


def placement_wire(event: Granted) -> list[Any]:
    """A grant's placements as plain data: per bundle ``[node, resources, gpus, group,
    bundle index]``."""
    return [
        [str(p.node_id), p.resources.to_dict(), [list(g) for g in p.gpus],
         None if p.group is None else str(p.group), p.bundle_index]
        for p in event.placements
    ]


class Head:
    """The head service (see the module docstring)."""

    def __init__(self, host: str, port: int, token: bytes, tls: _tls.TlsFiles) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.tls = tls
        self.head_id = secrets.token_hex(4)
        self.loop = asyncio.get_running_loop()
        self.broker = Broker(
            [], now=self.loop.time(), deadlock_delay=DEADLOCK_DELAY - EDGE_DELAY
        )
        self.nodes: dict[str, Peer] = {}
        self.drivers: dict[str, Peer] = {}
        self._lost_nodes: deque[dict[str, Any]] = deque(maxlen=LOST_KEPT)
        self._peers: dict[Connection, Peer] = {}
        self._server: WireServer | None = None
        self._monitor: asyncio.Task[None] | None = None
        self._clock = BrokerClock(self.loop, self.broker, self._dispatch)
        self._view_due: asyncio.TimerHandle | None = None
        self._beats: tuple[asyncio.DatagramTransport, BeatServer] | None = None
        self.dispatcher = Dispatcher(
            "the cluster head",
            requests=[
                request(JoinNode, self._join_node),
                request(JoinDriver, self._join_driver),
                request(Claim, self._claim),
                request(ClusterStatus, self._status),
            ],
            notifications=[
                notification(Beat, self._beat),
                notification(Leave, self._leave),
                notification(Withdraw, self._withdraw),
                notification(ReleaseHolder, self._release),
                notification(SetParent, self._set_parent),
                notification(Blocked, self._blocked),
            ],
        )

    async def start(self) -> tuple[str, int]:
        """Listen; returns the address peers reach the head at."""
        self._server = await serve_tcp(
            self.host, self.port, self.dispatcher, self.token,
            tls=_tls.server_context(self.tls), binding=_tls.context_fingerprint(self.tls),
            on_close=self._closed,
        )
        self.port = self._server.address[1]
        self._beats = await open_beat_server(self.host, self.port, self.token, self._heard_udp)
        self._monitor = self.loop.create_task(self._watch(), name="actorrt:head-watch")
        logger.info("actorrt head %s listening on %s:%d", self.head_id, self.host, self.port)
        return self.host, self.port

    async def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        self._clock.cancel()
        if self._view_due is not None:
            self._view_due.cancel()
        if self._beats is not None:
            self._beats[0].close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # ----------------------------------------------------------------- peers

    def _join_node(self, conn: Connection, request_id: int, msg: JoinNode) -> None:
        if conn in self._peers:
            conn.reply_error(request_id, ValueError("this connection has already joined"))
            return
        old = self.nodes.get(msg.node_id)
        if old is not None:
            self._lose(old, "it joined again", left=True)
        try:
            node = NodeInventory(msg.node_id, msg.resources, msg.gpu_ids)
        except (TypeError, ValueError) as exc:
            conn.reply_error(request_id, exc)
            return
        info = {
            "node_id": msg.node_id, "host": msg.host, "port": msg.port,
            "resources": dict(msg.resources), "gpu_ids": list(msg.gpu_ids), "pid": msg.pid,
        }
        peer = Peer(conn, "node", msg.node_id, info)
        self._peers[conn] = peer
        self.nodes[msg.node_id] = peer
        conn.reply(request_id, {"head_id": self.head_id, "beat": BEAT, "lost_after": LOST_AFTER})
        logger.info("node %s (%s) joined: %s", msg.node_id, msg.host, dict(msg.resources))
        for driver in list(self.drivers.values()):
            self._send(driver, NodeUp(info))
        self._dispatch(self.broker.add_node(node, now=self.loop.time()))

    def _join_driver(self, conn: Connection, request_id: int, msg: JoinDriver) -> None:
        if conn in self._peers or msg.runtime_id in self.drivers or "/" in msg.runtime_id:
            conn.reply_error(request_id, ValueError(
                f"driver {msg.runtime_id!r} cannot join: already joined, or an id with '/'"
            ))
            return
        peer = Peer(conn, "driver", msg.runtime_id, {"host": msg.host, "pid": msg.pid})
        self._peers[conn] = peer
        self.drivers[msg.runtime_id] = peer
        conn.reply(request_id, {
            "head_id": self.head_id, "beat": BEAT, "lost_after": LOST_AFTER,
            "nodes": [node.info for node in self.nodes.values()],
            "total": self.broker.total(), "available": self.broker.available(),
        })
        self._push_views()

    def _beat(self, conn: Connection, msg: Beat) -> None:
        peer = self._peers.get(conn)
        if peer is not None:
            peer.last_seen = time.monotonic()

    def _heard_udp(self, peer_id: str, lag: float) -> bool:
        peer = self.nodes.get(peer_id) or self.drivers.get(peer_id)
        if peer is None:
            return False
        peer.last_seen = time.monotonic()
        if lag > LOST_AFTER:
            if not peer.stalled:
                logger.warning(
                    "%s is alive, but its event loop has not run for %.1f s: something "
                    "blocks it (an import, file I/O, a sleep in a callback). It stays a "
                    "member (its heartbeats come from a thread), but what it runs waits; "
                    "move blocking work off the loop (asyncio.to_thread)", peer.describe(), lag,
                )
            peer.stalled = lag
        elif peer.stalled and lag < BEAT:
            logger.info("%s: its event loop runs again (it was blocked for %.1f s or more)",
                        peer.describe(), peer.stalled)
            peer.stalled = 0.0
        return True

    def _leave(self, conn: Connection, msg: Leave) -> None:
        peer = self._peers.get(conn)
        if peer is not None:
            peer.leaving = msg.reason

    def _closed(self, conn: Connection, error: ConnectionLostError) -> None:
        peer = self._peers.get(conn)
        if peer is not None:
            if peer.leaving is not None:
                self._lose(peer, peer.leaving, left=True)
            else:
                self._lose(peer, f"its connection closed without a goodbye ({error}): the "
                                 "process ended, or its machine or link went down")

    async def _watch(self) -> None:
        watch = LoopWatch(BEAT, LOST_AFTER / 2)
        while True:
            now = await watch.round()
            for peer in list(self._peers.values()):
                silent = watch.silent(peer.last_seen, now)
                if silent > LOST_AFTER:
                    self._lose(peer, f"nothing heard from it for {silent:.1f} s", drop=True)
                else:
                    self._send(peer, Beat())

    def _lose(self, peer: Peer, reason: str, left: bool = False, drop: bool = False) -> None:
        """End ``peer``'s membership: ``left`` when it said goodbye, ``drop`` when the head
        ends it (the peer is told why, if it still listens)."""
        if self._peers.pop(peer.conn, None) is None:
            return
        if drop and not peer.conn.is_closing():
            peer.conn.notify(Leave(f"the head dropped this {peer.kind}: {reason}"))
            peer.conn.close()  # the Leave goes first; a peer that does not read it is cut
            self.loop.call_later(CLOSE_GRACE, peer.conn.abort)
        else:
            peer.conn.abort()
        if self._beats is not None:
            self._beats[1].forget(peer.id)
        where = peer.describe()
        if left:
            logger.info("%s left: %s", where, reason)
        else:
            logger.warning("%s is lost: %s", where, reason)
        if peer.kind == "node":
            del self.nodes[peer.id]
            self._lost_nodes.append({"node": peer.id, "host": peer.info["host"],
                                     "at": time.time(), "reason": reason, "left": left})
            what = "left" if left else "was lost"
            for driver in list(self.drivers.values()):
                self._send(driver, NodeDown(peer.id, f"{where} {what}: {reason}"))
            self._dispatch(self.broker.node_lost(peer.id, now=self.loop.time()))
        else:
            del self.drivers[peer.id]
            events: list[Event] = []
            for holder in peer.holders:
                events += self.broker.release(holder, now=self.loop.time())
            self._dispatch(events)

    # ------------------------------------------------------------- the broker

    def _driver_of(self, conn: Connection, *ids: str | None) -> Peer | None:
        peer = self._peers.get(conn)
        if peer is None or peer.kind != "driver":
            return None
        prefix = peer.id + "/"
        if all(i is None or i.startswith(prefix) for i in ids):
            return peer
        return None

    def _claim(self, conn: Connection, request_id: int, msg: Claim) -> None:
        peer = self._driver_of(conn, msg.request_id, msg.holder, msg.parent)
        if peer is None:
            conn.reply_error(request_id, PermissionError(
                "only a joined driver may claim resources, with ids of its own"
            ))
            return
        placement: object = msg.placement
        if isinstance(placement, list):
            placement = GroupTarget(placement[0], placement[1])
        try:
            events = self.broker.request(
                msg.request_id, msg.holder, msg.resources, bundles=msg.bundles,
                strategy=msg.strategy, placement=placement, parent=msg.parent,
                allow_empty_head=msg.allow_empty_head, now=self.loop.time(),
            )
        except Exception as exc:
            conn.reply_error(request_id, exc)
            return
        peer.holders.add(msg.holder)
        conn.reply(request_id, None)
        self._dispatch(events)

    def _withdraw(self, conn: Connection, msg: Withdraw) -> None:
        if self._driver_of(conn, msg.request_id) is not None:
            self._dispatch(self.broker.cancel(msg.request_id, now=self.loop.time()))

    def _release(self, conn: Connection, msg: ReleaseHolder) -> None:
        peer = self._driver_of(conn, msg.holder)
        if peer is not None:
            peer.holders.discard(msg.holder)
            self._dispatch(self.broker.release(msg.holder, now=self.loop.time()))

    def _set_parent(self, conn: Connection, msg: SetParent) -> None:
        peer = self._driver_of(conn, msg.holder, msg.parent)
        if peer is not None:
            peer.holders.add(msg.holder)
            self.broker.set_parent(msg.holder, msg.parent)

    def _blocked(self, conn: Connection, msg: Blocked) -> None:
        if self._driver_of(conn, msg.waiter, msg.on_request, msg.on_holder) is None:
            return
        now = self.loop.time()
        on: dict[str, Any] = (
            {"on_request": msg.on_request} if msg.on_request is not None
            else {"on_holder": msg.on_holder}
        )
        try:
            if msg.added:
                self.broker.blocked(msg.waiter, serial=msg.serial, now=now, **on)
            else:
                self.broker.unblocked(msg.waiter, now=now, **on)
        except (KeyError, TypeError, ValueError) as exc:
            logger.debug("ignored a wait edge of %s: %s", msg.waiter, exc)
        self._arm()

    def _dispatch(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, Granted):
                self._to(event.holder, Grant(
                    str(event.request_id), str(event.holder), placement_wire(event),
                    None if event.group is None else str(event.group),
                ))
            elif isinstance(event, Failed):
                self._to(event.holder, Deny(str(event.request_id), str(event.holder),
                                            event.error))
            elif isinstance(event, Revoked):
                self._to(event.holder, Revoke(
                    str(event.request_id), str(event.holder),
                    None if event.group is None else str(event.group),
                    None if event.node is None else str(event.node),
                ))
            elif isinstance(event, AskDeadlocked):
                self._to(event.waiter, Deadlocked(str(event.waiter), str(event.target),
                                                  event.error))
            elif isinstance(event, Stalled):
                self._to(event.holder, Stall(str(event.request_id), str(event.holder),
                                             event.reason))
        self._arm()
        self._push_views()

    def _to(self, holder: Hashable, message: Any) -> None:
        driver = self.drivers.get(str(holder).partition("/")[0])
        if driver is not None:
            self._send(driver, message)

    def _send(self, peer: Peer, message: Any) -> None:
        if not peer.conn.is_closing():
            peer.conn.notify(message)

    def _arm(self) -> None:
        self._clock.arm()

    def _push_views(self) -> None:
        if self._view_due is None and self.drivers:
            self._view_due = self.loop.call_later(VIEW_DELAY, self._send_views)

    def _send_views(self) -> None:
        self._view_due = None
        total, available = self.broker.total(), self.broker.available()
        pending = self.broker.pending(now=self.loop.time()) if self.drivers else []
        for driver in list(self.drivers.values()):
            prefix = driver.id + "/"
            own = [
                [str(p.request_id), str(p.holder), [dict(b) for b in p.bundles], p.strategy,
                 str(p.queue), p.waited_s, dict(p.short_of), [str(h) for h in p.held_by],
                 p.reserved, [str(b) for b in p.behind], p.stalled, p.reason]
                for p in pending
                if str(p.holder).startswith(prefix)
            ]
            self._send(driver, View(total, available, own))

    # ---------------------------------------------------------------- status

    def _status(self, conn: Connection, request_id: int, msg: ClusterStatus) -> None:
        conn.reply(request_id, self.status())

    def now(self) -> float:
        """The broker's clock."""
        return self.loop.time()

    def lost_nodes(self) -> list[dict[str, Any]]:
        """The last nodes that left or were lost (``node``, ``host``, ``at`` wall-clock,
        ``reason``, ``left``), oldest first; a node that joins again leaves the list."""
        return [n for n in self._lost_nodes if n["node"] not in self.nodes]

    def status(self) -> dict[str, Any]:
        """What ``actorrt status`` shows of the cluster."""
        inventories = {str(n.node_id): n for n in self.broker.nodes}
        now = time.monotonic()
        nodes = []
        for peer in self.nodes.values():
            inventory = inventories.get(peer.id)
            nodes.append({
                **peer.info,
                "joined": peer.joined,
                "heard_s_ago": round(now - peer.last_seen, 3),
                "stalled_s": peer.stalled,
                "available": inventory.free_resources().to_dict() if inventory else {},
            })
        return {
            "head_id": self.head_id,
            "address": f"{self.host}:{self.port}",
            "pid": os.getpid(),
            "now": time.time(),
            "nodes": nodes,
            "drivers": [
                {"runtime_id": d.id, **d.info, "joined": d.joined,
                 "heard_s_ago": round(now - d.last_seen, 3), "stalled_s": d.stalled}
                for d in self.drivers.values()
            ],
            "total": self.broker.total(),
            "available": self.broker.available(),
            "pending": len(self.broker.pending(now=self.loop.time())),
        }
