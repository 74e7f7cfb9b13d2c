"""A node agent: one machine's resources in a cluster, and the worker processes on it.

The agent joins the head with what its machine has (probed, or given to ``actorrt start``)
and keeps telling it that it is alive. Drivers granted resources here connect to the agent
directly and ask it to start worker processes (``StartWorker``): the agent forks each one
from its own fork server (or starts a fresh interpreter), with the environment the driver
asks for over this machine's own, forwards its output lines to that driver and reports its
exit. A worker connects back to its driver by itself; the agent never sees its messages.

Nothing the agent started outlives what it was for:

- a driver's connection that closes takes that driver's workers with it;
- losing the head (its connection closed, it dropped this node, or it was silent for
  ``LOST_AFTER`` seconds while this agent's loop ran) kills every worker here, because the
  head has given their grants away by then; the agent then joins again, as a new node,
  once it can reach the head (a refusal, such as a wrong token, ends the agent instead);
- the agent's own death takes its workers with it (their death signal and watcher).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import time
from typing import Any

from .._errors import AuthenticationError, ProtocolVersionError
from .._processes._pool import WorkerPool
from .._processes._worker_process import WorkerKey, WorkerProcess
from .._wire import _tls
from .._wire._connection import Connection, ConnectionLostError
from .._wire._dispatcher import Dispatcher, notification, request
from .._wire._messages import (
    Beat,
    JoinNode,
    KillWorker,
    Leave,
    StartWorker,
    WorkerExit,
    WorkerOutput,
)
from .._wire._transport import WireServer, connect_tcp, serve_tcp
from ..resources import NodeInventory
from ._beats import BeatThread, LoopWatch
from ._head import BEAT, LOST_AFTER

__all__ = ["NodeAgent"]

logger = logging.getLogger("actorrt")

RETRY_MAX = 2.0  # seconds between two attempts to reach a lost head, at most
CONNECT_TIMEOUT = 3.0  # seconds one attempt may take


class AgentWorker(WorkerProcess):
    """A worker this agent started for a driver: its output goes to that driver."""

    def __init__(self, key: WorkerKey, worker_id: str, driver: Connection) -> None:
        super().__init__(key, worker_id)
        self.driver = driver
        self.ended_because: str | None = None  # why this agent ended it, if it did

    async def _forward(self, stream: asyncio.StreamReader, sink: Any) -> None:
        number = 1 if sink is sys.stdout else 2
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # longer than the stream's limit: pass it on in pieces
                line = await stream.read(1 << 16)
            if not line:
                return
            if not self.driver.is_closing():
                self.driver.notify(
                    WorkerOutput(self.worker_id, number, line.decode(errors="replace"))
                )


class NodeAgent:
    """One node of a cluster (see the module docstring).

    Args:
        head: the head's ``(host, port)``.
        token: the cluster's token.
        node: what this machine offers (its id is replaced by a fresh one at each join).
        host: this machine's address, as drivers reach it.
        tls: this agent's certificate and key (drivers pin it through the handshake).
        port: the agent's port (0: any free one).
    """

    def __init__(
        self,
        head: tuple[str, int],
        token: bytes,
        node: NodeInventory,
        host: str,
        tls: _tls.TlsFiles,
        port: int = 0,
    ) -> None:
        self.head = head
        self.token = token
        self.node = node
        self.host = host
        self.port = port
        self.tls = tls
        self.node_id: str | None = None  # the id of the current membership
        self._joins = itertools.count(1)
        self._workers: dict[str, AgentWorker] = {}
        self._server: WireServer | None = None
        self._head_conn: Connection | None = None
        self._closed = False
        self._forks = WorkerPool("", "", {"runtime_class": "actorrt._runtime._root:Runtime"})
        self.joined = asyncio.Event()  # set while this node is a member
        self.dispatcher = Dispatcher(
            "a node agent",
            requests=[request(StartWorker, self._start_worker)],
            notifications=[notification(KillWorker, self._kill_worker)],
        )

    async def start(self) -> None:
        """Listen for drivers."""
        self._server = await serve_tcp(
            self.host, self.port, self.dispatcher, self.token,
            tls=_tls.server_context(self.tls), binding=_tls.context_fingerprint(self.tls),
            on_close=self._driver_gone,
        )
        self.port = self._server.address[1]

    async def run(self) -> None:
        """Be a member of the cluster until :meth:`close`: join, stay, join again.

        Only what can heal is tried again: a head that cannot be reached, or a connection
        that ended. A refusal that no retry can change (the head does not hold this token,
        its certificate is not its own, or it runs another release) is raised at once.

        Raises:
            AuthenticationError: the head refused this node's token, or the TLS handshake
                failed.
            ProtocolVersionError: the head speaks another protocol version.
        """
        delay = 0.2
        while not self._closed:
            try:
                await self._membership()
                delay = 0.2
            except (AuthenticationError, ProtocolVersionError) as exc:
                logger.error("node agent: the head at %s:%d refused this node: %s",
                             *self.head, exc)
                raise
            except (OSError, ConnectionLostError, TimeoutError) as exc:
                if self._closed:
                    return
                logger.warning(
                    "node agent: cannot reach the head at %s:%d (%s); trying again in %.1f s",
                    *self.head, exc, delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def _membership(self) -> None:
        dropped: list[str] = []
        conn = await connect_tcp(
            *self.head, self.token, Dispatcher(
                "a node agent's head link", notifications=[
                    notification(Beat, self._beat),
                    notification(Leave, lambda c, m: dropped.append(m.reason)),
                ]
            ),
            tls=_tls.client_context(), connect_timeout=CONNECT_TIMEOUT,
        )
        self._head_conn = conn
        self._heard = time.monotonic()
        udp: BeatThread | None = None
        node_id = f"{self.host}-{os.getpid()}-{next(self._joins)}"
        total = self.node.total_resources().to_dict()
        try:
            await asyncio.wait_for(conn.request(JoinNode(
                node_id, self.host, self.port, total, list(self.node.gpu_ids), os.getpid()
            )), LOST_AFTER * 5)
            self.node_id = node_id
            self.joined.set()
            logger.info("node %s joined the head at %s:%d", node_id, *self.head)
            udp = BeatThread(*self.head, self.token, node_id, BEAT).start()
            watch = LoopWatch(BEAT, LOST_AFTER / 2)
            while not conn.is_closing():
                now = await watch.round()
                if conn.is_closing():
                    break
                silent = watch.silent(max(self._heard, udp.heard), now)
                if silent > LOST_AFTER:
                    raise TimeoutError(f"nothing heard from the head for {silent:.1f} s")
                conn.notify(Beat())
                udp.progress()
            if dropped:
                raise ConnectionLostError(dropped[0])
            raise ConnectionLostError(
                f"the head closed the connection ({conn.close_reason or 'no reason'})"
            )
        finally:
            if udp is not None:
                udp.close()
            self.joined.clear()
            self.node_id = None
            self._head_conn = None
            conn.abort()
            self._kill_all("this node lost the head, which gives their resources away")

    def _beat(self, conn: Connection, msg: Beat) -> None:
        self._heard_now()

    def _heard_now(self) -> None:
        self._heard = time.monotonic()

    async def close(self) -> None:
        self._closed = True
        if self._head_conn is not None:
            if not self._head_conn.is_closing():
                self._head_conn.notify(Leave("the node agent is stopping"))
            self._head_conn.close()
        self._kill_all("the node agent is stopping")
        waits = [w.exited for w in self._workers.values() if w.started]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        await self._forks.shutdown()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # --------------------------------------------------------------- workers

    def _start_worker(self, conn: Connection, request_id: int, msg: StartWorker) -> None:
        if self.node_id is None:
            conn.reply_error(request_id, ConnectionError(
                f"node agent at {self.host}:{self.port} is not a member of the cluster now "
                "(it lost the head)"
            ))
            return
        cwd = msg.cwd if os.path.isdir(msg.cwd) else os.getcwd()
        task = asyncio.get_running_loop().create_task(self._start(conn, msg, cwd))

        def answer(done: asyncio.Task[int]) -> None:
            if conn.is_closing():
                return
            if done.cancelled():
                conn.reply_error(request_id, ConnectionError("the node agent is stopping"))
            elif done.exception() is not None:
                conn.reply_error(request_id, done.exception())  # type: ignore[arg-type]
            else:
                conn.reply(request_id, done.result())

        task.add_done_callback(answer)

    async def _start(self, conn: Connection, msg: StartWorker, cwd: str) -> int:
        sys_path = tuple(str(p) for p in msg.boot.get("sys_path", sys.path))
        env = {str(k): str(v) for k, v in msg.env.items()}
        # Which node this is, for what runs there (Train's ranks and rendezvous address).
        env["ACTORRT_NODE_ID"] = self.node_id or ""
        env["ACTORRT_NODE_IP"] = self.host
        key = WorkerKey(
            executable=sys.executable, cwd=cwd, sys_path=sys_path,
            cuda_visible_devices=env.pop("CUDA_VISIBLE_DEVICES", None),
            thread_variables=(), worker_env=tuple(sorted(env.items())),
        )
        worker = AgentWorker(key, msg.worker_id, conn)
        worker.connected.set_result(conn)  # it connects to its driver, not here
        worker.on_exit = self._exited
        self._workers[msg.worker_id] = worker
        boot = dict(msg.boot)
        try:
            forks = await self._forks.fork_server_for(key)
            await worker.start("", str(boot.pop("secret", "")), os.getpid(), boot, forks)
        except BaseException:
            self._workers.pop(msg.worker_id, None)
            worker.kill()
            raise
        return worker.pid

    def _kill_worker(self, conn: Connection, msg: KillWorker) -> None:
        worker = self._workers.get(msg.worker_id)
        if worker is not None and worker.driver is conn:
            worker.kill()

    def _exited(self, worker: WorkerProcess, code: int) -> None:
        self._workers.pop(worker.worker_id, None)
        assert isinstance(worker, AgentWorker)
        if not worker.driver.is_closing():
            worker.driver.notify(WorkerExit(worker.worker_id, code, worker.ended_because))

    def _driver_gone(self, conn: Connection, error: ConnectionLostError) -> None:
        for worker in list(self._workers.values()):
            if worker.driver is conn:
                worker.kill()

    def _kill_all(self, why: str) -> None:
        if self._workers:
            logger.warning("node agent: killing %d worker(s): %s", len(self._workers), why)
        for worker in list(self._workers.values()):
            worker.ended_because = f"node agent at {self.host}:{self.port} ended it: {why}"
            worker.kill()

    def describe(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "port": self.port,
                "workers": len(self._workers)}

