"""A worker process on another node of a cluster, seen from the runtime that owns it.

On one machine the pool starts its workers itself (``_worker_process``). In cluster mode an
actor granted on another node runs in a worker that node's agent starts for us
(``actorrt._cluster``): the agent forks it there, forwards its output lines here and reports
its exit, and kills it when asked or when this runtime's connection to the agent ends. The
worker connects back to this runtime over TCP (TLS, the cluster's token) and from then on
is served exactly as a local one: the same key, pooling and process actor.

The agent is reached through the :class:`NodeStarter` protocol, so this layer never
imports the cluster layer above it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from ._forkserver import ForkServer
from ._worker_process import WorkerKey, WorkerProcess

__all__ = [
    "ClusterSide", "NodeLostExit", "NodeStarter", "RemoteWorkerProcess", "remote_environment",
]

# The exit code reported for a worker whose node was lost or whose agent cannot be reached:
# SIGKILL's, as the node's processes are gone or will be killed by their agent.
NodeLostExit = -9


class NodeStarter(Protocol):
    """What starts, kills and reports the workers of one node (its agent, over the wire)."""

    @property
    def node_id(self) -> str: ...

    @property
    def where(self) -> str:
        """The node, for messages: ``node ID (HOST)``."""
        ...

    async def start_worker(
        self, worker: RemoteWorkerProcess, env: dict[str, str], cwd: str, boot: dict[str, Any]
    ) -> int:
        """Have the agent start ``worker``; returns its pid there."""
        ...

    def kill_worker(self, worker_id: str) -> None: ...


class ClusterSide(Protocol):
    """What the processes layer needs of a driver's link to its cluster."""

    @property
    def host(self) -> str:
        """This runtime's address, as the cluster's nodes reach it."""
        ...

    @property
    def token(self) -> bytes:
        """The cluster's token: every connection proves it knows it."""
        ...

    def starter(self, node_id: str) -> NodeStarter:
        """The agent of node ``node_id``."""
        ...


def remote_environment(key: WorkerKey) -> dict[str, str]:
    """What a worker on another node gets on top of that node's own environment: the
    actor's ``worker_env``, thread counts, its GPUs and this program's ``PYTHONPATH`` (the
    node runs the same code at the same paths)."""
    env = dict(key.worker_env)
    env.update(dict(key.thread_variables))
    if key.cuda_visible_devices is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = key.cuda_visible_devices
    for name in ("PYTHONPATH",):
        value = key.environment().get(name)
        if value is not None and name not in env:
            env[name] = value
    env["PYTHONUNBUFFERED"] = "1"
    return env


class RemoteWorkerProcess(WorkerProcess):
    """A worker that a node agent started for this runtime (see the module docstring)."""

    remote = True

    def __init__(self, key: WorkerKey, worker_id: str, starter: NodeStarter) -> None:
        super().__init__(key, worker_id)
        self.starter = starter
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def start(
        self,
        socket_path: str,
        secret_text: str,
        owner_pid: int,
        boot_fields: Mapping[str, str] | None = None,
        forks: ForkServer | None = None,
    ) -> None:
        # The agent sets owner_pid to its own: the worker ends with the agent.
        boot = self.boot_line("", secret_text, owner_pid, boot_fields)
        env = remote_environment(self.key)
        self._pid = await self.starter.start_worker(self, env, self.key.cwd, boot)
        self.label = f"worker {self.worker_id} on {self.starter.where}"
        self.where = f" on {self.starter.where}"
        self._tasks = [asyncio.get_running_loop().create_task(self._reap())]

    def output(self, stream: int, text: str) -> None:
        """A line the worker wrote, forwarded by its agent."""
        if stream == 2 and not self.connected.done():
            self._early_stderr.append(text.rstrip("\n"))
        out = sys.stdout if stream == 1 else sys.stderr
        out.write(f"({self.label} pid={self._pid}) {text}")
        if not text.endswith("\n"):
            out.write("\n")
        out.flush()

    def exited_there(self, code: int, why: str | None = None) -> None:
        """The agent reported the worker's exit (or can no longer be reached: ``why``)."""
        if why is not None and self.gone_because is None:
            self.gone_because = why
        if not self._exit.done():
            self._exit.set_result(code)
        if self.conn is not None:
            self.conn.abort()

    async def wait(self) -> int:
        return await self._exit

    def process_state(self) -> str:
        return "?"  # its /proc is on another machine: only pings tell

    def kill_group(self) -> None:
        if self._pid is not None and not self._exit.done():
            self.starter.kill_worker(self.worker_id)

    async def _reap(self) -> None:
        self._ended(await self.wait())
