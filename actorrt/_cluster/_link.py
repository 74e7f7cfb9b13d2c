"""A driver's link to its cluster: the head's broker, and the agents of the nodes.

A runtime given ``address=`` connects to the head (``JoinDriver``) and keeps a
:class:`RemoteBroker` in place of a broker of its own: the scheduler calls it as it would
call a broker, and it forwards each call to the head, every id prefixed with this runtime's
id and ``/``; the head's answers (``Grant``, ``Deny``, ``Revoke``, ``Deadlocked``, ``Stall``)
come back as the broker's own events, ids unprefixed, and go to the scheduler. What the
scheduler reads at once (a group's bundles, the resource views) is kept here from what the
head sent last.

An actor granted on a node runs in a worker that the node's agent starts
(:class:`AgentLink`, connected on first need); the worker then connects to this runtime
directly, so calls never pass through the head.

When the head goes silent for ``LOST_AFTER`` seconds (or its connection closes), the loss is
logged at once, requests still waiting fail with :class:`~actorrt.HeadLostError`, and so
does every later one; actors already running keep running, as their workers are connected
to this runtime and not to the head.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from .._errors import AuthenticationError, HeadLostError, ProtocolVersionError, ResourceError
from .._placement._remote_worker import RemoteWorkerProcess
from .._wire import _tls
from .._wire._connection import Connection, ConnectionLostError
from .._wire._dispatcher import Dispatcher, notification
from .._wire._messages import (
    Beat,
    Blocked,
    Claim,
    Deadlocked,
    Deny,
    Grant,
    JoinDriver,
    KillWorker,
    NodeDown,
    NodeUp,
    ReleaseHolder,
    Revoke,
    SetParent,
    Stall,
    StartWorker,
    View,
    Withdraw,
    WorkerExit,
    WorkerOutput,
)
from .._wire._transport import connect_tcp
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
from ._beats import BeatClient, open_beat_client
from ._files import local_address_towards, read_token

__all__ = ["AgentLink", "ClusterLink", "RemoteBroker"]

logger = logging.getLogger("actorrt")


class RemoteBroker:
    """The head's broker, as this driver's scheduler calls it (see the module docstring)."""

    def __init__(self, link: ClusterLink) -> None:
        self.link = link
        self.prefix = link.runtime_id + "/"
        self.deliver: Any = None  # the scheduler's deliver(events), set by the driver role
        self.lost: HeadLostError | None = None
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
        self._claims[rid] = (str(holder), (specs, str(strategy)))
        reply = self.link.head.request(Claim(
            self.prefix + rid, self.prefix + str(holder), spec, specs, str(strategy), where,
            self._out(parent), allow_empty_head,
        ))
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

    def pending(self, *, now: float | None = None) -> list[PendingRequest]:
        return list(self._pending)

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
        if group is not None and claim is not None:
            specs, strategy = claim[1]
            self._groups[group] = GroupInfo(
                group, holder, tuple(specs or ()), strategy, tuple(p.node_id for p in placements)
            )
        self._deliver([Granted(rid, holder, placements, group)])

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

    def head_lost(self, error: HeadLostError) -> None:
        """Fail every request still waiting, and every later one."""
        self.lost = error
        waiting, self._claims = self._claims, {}
        self._deliver([Failed(rid, holder, error) for rid, (holder, _) in waiting.items()])


def _as_dict(value: Mapping[str, object] | Resources) -> dict[str, float]:
    if isinstance(value, Resources):
        return dict(value.to_dict())
    return {str(k): float(v) for k, v in value.items()}  # type: ignore[arg-type]


class AgentLink:
    """This driver's connection to one node's agent (a :class:`NodeStarter`)."""

    def __init__(self, link: ClusterLink, node: dict[str, Any]) -> None:
        self.link = link
        self.node_id = str(node["node_id"])
        self.host = str(node["host"])
        self.port = int(node["port"])
        self.where = f"node {self.node_id} ({self.host})"
        self.workers: dict[str, RemoteWorkerProcess] = {}
        self._conn: Connection | None = None
        self._connecting: asyncio.Future[Connection] | None = None
        self.lost: str | None = None

    async def conn(self) -> Connection:
        if self._conn is not None and not self._conn.is_closing():
            return self._conn
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())
        return await asyncio.shield(self._connecting)

    async def _connect(self) -> Connection:
        dispatcher = Dispatcher(
            f"the link to {self.where}",
            notifications=[
                notification(WorkerOutput, self._output),
                notification(WorkerExit, self._exit),
            ],
        )
        conn = await connect_tcp(
            self.host, self.port, self.link.token, dispatcher, tls=_tls.client_context(),
            on_close=self._closed,
        )
        self._conn = conn
        return conn

    async def start_worker(
        self, worker: RemoteWorkerProcess, env: dict[str, str], cwd: str, boot: dict[str, Any]
    ) -> int:
        if self.lost is not None:
            raise ConnectionError(f"cannot start a worker on {self.where}: {self.lost}")
        conn = await self.conn()
        self.workers[worker.worker_id] = worker
        try:
            pid: int = await conn.request(StartWorker(worker.worker_id, env, cwd, boot))
        except BaseException:
            self.workers.pop(worker.worker_id, None)
            raise
        return pid

    def kill_worker(self, worker_id: str) -> None:
        conn = self._conn
        if conn is not None and not conn.is_closing():
            conn.notify(KillWorker(worker_id))
        elif worker_id in self.workers:  # the agent is gone: so is the worker
            self.workers.pop(worker_id).exited_there(-9)

    def _output(self, conn: Connection, msg: WorkerOutput) -> None:
        worker = self.workers.get(msg.worker_id)
        if worker is not None:
            worker.output(msg.stream, msg.text)

    def _exit(self, conn: Connection, msg: WorkerExit) -> None:
        worker = self.workers.pop(msg.worker_id, None)
        if worker is not None:
            worker.exited_there(msg.code)

    def _closed(self, conn: Connection, error: ConnectionLostError) -> None:
        """The agent's connection ended: the agent kills this driver's workers there (or
        has died with them), so their actors end as on a lost node."""
        if conn is self._conn:
            self._conn = None
        self._workers_gone(f"{self.where} was lost: the connection to its agent ended ({error})")

    def _workers_gone(self, why: str) -> None:
        workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            if worker.hosted is not None:
                worker.hosted.node_lost(why)
            worker.exited_there(-9)

    def node_lost(self, reason: str) -> None:
        """The head says the node is lost: its workers are gone."""
        self.lost = reason
        conn, self._conn = self._conn, None
        self._workers_gone(reason)
        if conn is not None:
            conn.abort()


class ClusterLink:
    """A driver runtime's link to its cluster (see the module docstring)."""

    def __init__(self, address: tuple[str, int], token: bytes, runtime_id: str) -> None:
        self.address = address
        self.token = token
        self.runtime_id = runtime_id
        self.host = local_address_towards(*address)
        self.broker = RemoteBroker(self)
        self.agents: dict[str, AgentLink] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.head_id = ""
        self._head: Connection | None = None
        self._watch: asyncio.Task[None] | None = None
        self._heard = 0.0
        self._beat = 0.5
        self._lost_after = 2.0
        self._closing = False
        self._joined = False
        self._udp: BeatClient | None = None

    @property
    def head(self) -> Connection:
        assert self._head is not None
        return self._head

    async def connect(self) -> None:
        """Join the head; raises a clear error when it cannot be reached."""
        host, port = self.address
        dispatcher = Dispatcher(
            "a driver's link to the cluster head",
            notifications=[
                notification(Beat, self._beat_in),
                notification(NodeUp, self._node_up),
                notification(NodeDown, self._node_down),
                notification(Grant, lambda c, m: self.broker.granted(m)),
                notification(Deny, lambda c, m: self.broker.denied(m)),
                notification(Revoke, lambda c, m: self.broker.revoked(m)),
                notification(Deadlocked, lambda c, m: self.broker.deadlocked(m)),
                notification(Stall, lambda c, m: self.broker.stalled(m)),
                notification(View, lambda c, m: self.broker.view(m)),
            ],
        )
        try:
            self._head = await connect_tcp(
                host, port, self.token, dispatcher, tls=_tls.client_context(),
                on_close=self._head_closed,
            )
            info = await asyncio.wait_for(
                self._head.request(JoinDriver(self.runtime_id, self.host, os.getpid())), 10.0
            )
        except (AuthenticationError, ProtocolVersionError):
            if self._head is not None:
                self._head.abort()
            raise  # clear as they are: a wrong token, another release
        except (OSError, TimeoutError) as exc:
            if self._head is not None:
                self._head.abort()
            raise ConnectionError(
                f"cannot connect to the actorrt cluster at {host}:{port}: {exc} (is "
                "`actorrt start --head` running there, and is the port open?)"
            ) from exc
        self._joined = True
        self.head_id = str(info["head_id"])
        self._beat = float(info["beat"])
        self._lost_after = float(info["lost_after"])
        for node in info["nodes"]:
            self.nodes[str(node["node_id"])] = node
        loop = asyncio.get_running_loop()
        self._heard = loop.time()
        self._udp = await open_beat_client(
            host, port, self.token, self.runtime_id, lambda: self._beat_in(None, None)
        )
        self._watch = loop.create_task(self._keep_alive(), name="actorrt:head-link")

    async def _keep_alive(self) -> None:
        loop = asyncio.get_running_loop()
        while self._head is not None and not self._head.is_closing():
            await asyncio.sleep(self._beat)
            silent = loop.time() - self._heard
            if silent > self._lost_after:
                self._lose_head(f"nothing heard from it for {silent:.1f} s")
                return
            self._head.notify(Beat())
            if self._udp is not None:
                self._udp.beat()

    def _beat_in(self, conn: Connection | None, msg: Beat | None) -> None:
        self._heard = asyncio.get_running_loop().time()

    def _head_closed(self, conn: Connection, error: ConnectionLostError) -> None:
        self._lose_head(f"its connection closed ({error})")

    def _lose_head(self, why: str) -> None:
        if self._closing or not self._joined or self.broker.lost is not None:
            return
        host, port = self.address
        error = HeadLostError(
            f"the actorrt cluster's head at {host}:{port} is lost: {why}. Resource requests "
            "fail from now on, and the actors this program runs on the cluster's nodes end "
            "(each node ends its workers when it loses the head, whose grants they held); "
            "inline actors here go on. The head is not fault tolerant: restart the cluster "
            "and the program (docs/cluster.md)"
        )
        logger.error("%s", error)
        if self._head is not None:
            self._head.abort()
        self.broker.head_lost(error)
        for agent in list(self.agents.values()):
            agent.node_lost(
                f"{agent.where} ended its workers: the cluster's head at {host}:{port} was lost"
            )
        self.agents.clear()

    def _node_up(self, conn: Connection, msg: NodeUp) -> None:
        self.nodes[str(msg.node["node_id"])] = msg.node

    def _node_down(self, conn: Connection, msg: NodeDown) -> None:
        self.nodes.pop(msg.node_id, None)
        agent = self.agents.pop(msg.node_id, None)
        if agent is not None:
            agent.node_lost(msg.reason)

    def starter(self, node_id: str) -> AgentLink:
        agent = self.agents.get(node_id)
        if agent is None:
            node = self.nodes.get(node_id)
            if node is None:
                raise ConnectionError(f"node {node_id} is not a member of the cluster")
            agent = self.agents[node_id] = AgentLink(self, node)
        return agent

    async def close(self) -> None:
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for agent in self.agents.values():
            if agent._conn is not None:
                agent._conn.close()
        if self._head is not None:
            self._head.close()
        if self._udp is not None:
            self._udp.close()


async def join_cluster(address: tuple[str, int], runtime_id: str) -> ClusterLink:
    """Connect a driver runtime to the cluster whose head is at ``address``."""
    link = ClusterLink(address, read_token(), runtime_id)
    await link.connect()
    return link
