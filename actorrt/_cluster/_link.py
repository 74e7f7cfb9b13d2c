"""A driver's link to its cluster: the head's broker, and the agents of the nodes.

A runtime given ``address=`` connects to the head (``JoinDriver``) and keeps a
:class:`~actorrt._cluster._remote_broker.RemoteBroker` in place of a broker of its own; the
head's answers arrive here and go to it.

An actor granted on a node runs in a worker that the node's agent starts
(:class:`AgentLink`, connected on first need); the worker then connects to this runtime
directly, so calls never pass through the head.

The link's UDP beats come from a thread (:class:`~._beats.BeatThread`), so the head keeps
hearing this driver while its event loop is busy; the link judges the head's silence only
over the time its own loop ran (:class:`~._beats.LoopWatch`). When the head goes silent
for ``LOST_AFTER`` seconds (or its connection closes), the loss is logged at once, requests
still waiting fail with :class:`~actorrt.HeadLostError`, and so does every later one. When
the head drops this driver (its ``Leave`` says why), the same happens with
:class:`~actorrt.DriverDroppedError`, whose message is the head's reason. The nodes end
their workers when they lose the head (their grants were the head's), so the actors this
program runs there end too, saying why; its inline actors go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

from .._errors import (
    AuthenticationError,
    DriverDroppedError,
    HeadLostError,
    ProtocolVersionError,
)
from .._processes._remote_worker import RemoteWorkerProcess
from .._wire import _tls
from .._wire._connection import Connection, ConnectionLostError
from .._wire._dispatcher import Dispatcher, notification
from .._wire._messages import (
    Beat,
    Deadlocked,
    Deny,
    Grant,
    JoinDriver,
    KillWorker,
    Leave,
    NodeDown,
    NodeUp,
    Revoke,
    Stall,
    StartWorker,
    View,
    WorkerExit,
    WorkerOutput,
)
from .._wire._transport import connect_tcp
from ._beats import BeatThread, LoopWatch
from ._files import local_address_towards, read_token
from ._remote_broker import RemoteBroker

__all__ = ["AgentLink", "ClusterLink", "join_cluster"]

logger = logging.getLogger("actorrt")


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
        if self.lost is not None:  # lost while it connected
            conn.abort()
            raise ConnectionError(f"cannot start a worker on {self.where}: {self.lost}")
        self.workers[worker.worker_id] = worker
        try:
            pid: int = await conn.request(StartWorker(worker.worker_id, env, cwd, boot))
        except ConnectionLostError as exc:
            self.workers.pop(worker.worker_id, None)
            raise ConnectionError(
                f"cannot start a worker on {self.where}: {self.lost or exc}"
            ) from exc
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
            worker.exited_there(msg.code, msg.why)

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
            worker.exited_there(-9, why)

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
        self._udp: BeatThread | None = None

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
                notification(Leave, self._dropped),
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
        self.broker.view(View(info["total"], info["available"], []))
        self._heard = time.monotonic()
        self._udp = BeatThread(host, port, self.token, self.runtime_id, self._beat).start()
        self._watch = asyncio.get_running_loop().create_task(
            self._keep_alive(), name="actorrt:head-link"
        )

    def view(self) -> dict[str, Any]:
        """The head and the nodes this driver reached, as plain data (for the dashboard)."""
        heard = self._heard if self._udp is None else max(self._heard, self._udp.heard)
        return {
            "address": f"{self.address[0]}:{self.address[1]}",
            "head_id": self.head_id,
            "heard_s_ago": round(time.monotonic() - heard, 3) if heard else None,
            "agents": [
                {"node": a.node_id, "host": a.host, "lost": getattr(a, "lost", None)}
                for a in self.agents.values()
            ],
        }

    async def _keep_alive(self) -> None:
        watch = LoopWatch(self._beat, self._lost_after / 2)
        head = self._head
        while head is not None and not head.is_closing():
            now = await watch.round()
            if head.is_closing():
                break  # lost or closed meanwhile
            heard = self._heard if self._udp is None else max(self._heard, self._udp.heard)
            silent = watch.silent(heard, now)
            if silent > self._lost_after:
                self._lose_head(f"nothing heard from it for {silent:.1f} s")
                return
            try:
                head.notify(Beat())
            except ConnectionLostError:
                break
            if self._udp is not None:
                self._udp.progress()
        # The connection is ending (the head closed it, or a write found it broken): the head
        # is lost now, not whenever the transport reports its end (a TLS transport may wait
        # for a flush that never comes), and never silently. Lost or dropped already, this
        # does nothing: the first reason stands.
        if head is not None:
            self._lose_head(f"its connection closed ({head.close_reason or 'closed'})")

    def _beat_in(self, conn: Connection | None, msg: Beat | None) -> None:
        self._heard = time.monotonic()

    def _dropped(self, conn: Connection, msg: Leave) -> None:
        host, port = self.address
        self._lose_head(msg.reason, DriverDroppedError(
            f"the actorrt cluster's head at {host}:{port} dropped this driver "
            f"({self.runtime_id}): {msg.reason.removeprefix('the head dropped this driver: ')}"
            ". It released everything this driver held: resource requests fail from now on, "
            "and the actors this program ran on the cluster's nodes end; inline actors here "
            "go on. The head is fine: connect again with a new runtime (docs/cluster.md)"
        ))

    def _head_closed(self, conn: Connection, error: ConnectionLostError) -> None:
        self._lose_head(f"its connection closed ({error})")

    def head_broken(self, error: ConnectionLostError) -> None:
        """A send to the head found its connection ended: the head is lost from now on."""
        self._lose_head(f"its connection closed ({error})")

    def _lose_head(self, why: str, error: HeadLostError | DriverDroppedError | None = None) -> None:
        if self._closing or not self._joined or self.broker.lost is not None:
            return
        host, port = self.address
        if error is None:
            error = HeadLostError(
                f"the actorrt cluster's head at {host}:{port} is lost: {why}. Resource "
                "requests fail from now on, and the actors this program runs on the "
                "cluster's nodes end (each node ends its workers when it loses the head, "
                "whose grants they held); inline actors here go on. The head is not fault "
                "tolerant: restart the cluster and the program (docs/cluster.md)"
            )
        logger.error("%s", error)
        if self._udp is not None:
            self._udp.close()
        if self._head is not None:
            self._head.abort()
        self.broker.head_lost(error)
        lost = "dropped this driver" if isinstance(error, DriverDroppedError) else "was lost"
        for agent in list(self.agents.values()):
            agent.node_lost(
                f"{agent.where} ended its workers: the cluster's head at {host}:{port} {lost}"
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
            if not self._head.is_closing():
                self._head.notify(Leave("the driver is shutting down"))
            self._head.close()
        if self._udp is not None:
            self._udp.close()


async def join_cluster(address: tuple[str, int], runtime_id: str) -> ClusterLink:
    """Connect a driver runtime to the cluster whose head is at ``address``."""
    link = ClusterLink(address, read_token(), runtime_id)
    await link.connect()
    return link
