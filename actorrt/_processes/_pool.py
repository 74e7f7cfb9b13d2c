"""Worker processes and their pool, seen from the runtime that owns them.

A worker is forked by the runtime's fork server (:mod:`actorrt._processes._forkserver`), a
template interpreter that has imported actorrt's worker side once, when the fork server can
give it exactly its environment; otherwise, or when the fork server cannot start, it is a
fresh interpreter started the plain way (:mod:`actorrt._processes._bootstrap`: ``-P``,
``PR_SET_PDEATHSIG``, actorrt imported from this process's folder). Either way it is in its
own process group, is told on its stdin where the runtime's socket is and the runtime's
secret (stdin, not the environment, so the secret does not leak into the worker's own
children), connects back, proves it knows the secret, and hosts one resource-bearing actor
at a time. The parent that its death signal watches is the *thread* that started it (the
fork server, or the runtime's event-loop thread, which lives as long as the runtime).
Processes the worker starts are ended by its own watcher (see
:mod:`actorrt._processes._worker_main`).

Idle workers are pooled by the exact environment they were started with (``WorkerKey``):
a worker is reused only for an actor whose key matches, never after a crash or a kill, and
at most ``max_uses`` times, so start-up and heavy imports are paid once.

A worker's stdout and stderr reach this process's, each line prefixed with the actor it
hosts. When a worker exits, its whole process group is killed, so processes it started go
with it; the exit is reaped at once (by the fork server, which reports it, for a forked
worker), leaving no zombie.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
from collections.abc import Callable, Mapping
from typing import Any

from .._core._spawn_progress import waiting_for
from .._wire._connection import Connection
from ._bootstrap import BOOTSTRAP, PACKAGE_PARENT, START_FAILED
from ._forkserver import (
    PRELOAD_VARIABLE,
    ForkServer,
    ForkUnavailable,
    fork_server_enabled,
    preload_modules,
)
from ._liveness import LivenessWatch
from ._remote_worker import NodeStarter, RemoteWorkerProcess
from ._worker_process import THREAD_VARIABLES, WorkerKey, WorkerProcess, describe_exit

__all__ = [  # what the processes layer imports from here
    "BOOTSTRAP", "PACKAGE_PARENT", "START_FAILED", "THREAD_VARIABLES", "WorkerKey",
    "WorkerPool", "WorkerProcess", "describe_exit",
]

logger = logging.getLogger("actorrt")

STARTING_FDS = 4  # descriptors a worker start in flight may still open here

# Workers on other nodes connect back over TLS, and this runtime's loop does each one's
# handshake: a burst of a thousand at once would keep the loop busy past each handshake's
# timeout, and the late ones would fail. So at most this many remote starts are in flight
# (from the agent's fork to the worker's hello); the others wait their turn, which the
# spawn's progress says. On one machine a start costs far less and needs no such bound.
REMOTE_STARTS_IN_FLIGHT = 32


def near_fd_limit(more: int = 0) -> bool:
    """Whether this process has (nearly) as many open files as its limit allows, counting
    ``more`` that it is about to open."""
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        return False
    return open_fds + more >= resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 16


def out_of_fds(exc: OSError) -> bool:
    """Whether starting a process failed for want of file descriptors. uvloop reports a
    failed socketpair as errno -1, so a failure near the limit counts too."""
    return exc.errno in (errno.EMFILE, errno.ENFILE) or near_fd_limit()


def fd_limit_message(exc: OSError) -> str:
    """Say that a worker could not start for want of file descriptors, and what to do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    which = "the system's" if exc.errno == errno.ENFILE else "this process's"
    return (
        f"cannot start a worker process: too many open files ({which} limit; "
        f"RLIMIT_NOFILE is {soft}, hard limit {hard}). Each running worker process holds "
        "about 4 of the runtime's file descriptors: raise the limit (`ulimit -n 65536` "
        "in the shell, or resource.setrlimit(resource.RLIMIT_NOFILE, ...)) or start fewer "
        "workers at once"
    )


class WorkerPool:
    """Starts workers, and keeps idle ones for reuse by actors with the same environment."""

    def __init__(
        self,
        socket_path: str,
        secret_text: str,
        boot_fields: Mapping[str, str] | None = None,
        *,
        max_idle: int = 8,
        max_uses: int = 1000,
    ) -> None:
        self.socket_path = socket_path
        self.secret_text = secret_text
        self.boot_fields = dict(boot_fields or {})  # more for each worker's boot line
        self.max_idle = max_idle
        self.max_uses = max_uses
        self._idle: dict[WorkerKey, list[WorkerProcess]] = {}
        self._all: dict[str, WorkerProcess] = {}
        self._reaping: set[asyncio.Future[int]] = set()
        self._count = 0
        self._starting = 0  # workers started and not yet connected
        self._remote_starts = asyncio.Semaphore(REMOTE_STARTS_IN_FLIGHT)
        self.watch = LivenessWatch(self.live_workers)
        # The fork server: started with the first worker, None while none is (or can be).
        self.preload = preload_modules()
        self.forks: ForkServer | None = None
        self._forks_starting: asyncio.Future[None] | None = None
        self._forks_off = not fork_server_enabled()
        # Cluster mode: the agent of each node, and what a worker there is told to connect
        # to (this runtime's TCP address) instead of the socket.
        self.node_starter: Callable[[str], NodeStarter] | None = None
        self.remote_boot: dict[str, Any] = {}
        self.remote_secret = ""

    async def fork_server_for(self, key: WorkerKey) -> ForkServer | None:
        """The fork server, if it can fork a worker for ``key`` (started on first need)."""
        if self._forks_off:
            return None
        if self._forks_starting is None:
            self._forks_starting = asyncio.ensure_future(self._start_fork_server(key))
        await asyncio.shield(self._forks_starting)
        forks = self.forks
        if forks is None or not forks.can_fork(
            key.executable, key.sys_path, key.cwd, key.environment()
        ):
            return None
        return forks

    async def _start_fork_server(self, key: WorkerKey) -> None:
        # Its environment is the first worker's: with preloaded modules, only workers whose
        # environment is exactly that are forked (their modules read it at import).
        forks = ForkServer(key.executable, key.cwd, key.sys_path, key.environment(),
                           self.preload)
        try:
            await forks.start(self.boot_fields.get("runtime_class", ""), os.getpid())
        except ForkUnavailable as exc:
            self._fork_server_lost(str(exc))
            return
        except asyncio.CancelledError:  # the runtime shut down meanwhile
            await forks.close()
            raise
        forks.on_lost = self._fork_server_lost
        self.forks = forks

    def _fork_server_lost(self, reason: str) -> None:
        """Say once why workers start the plain way from now on."""
        self._forks_off = True
        logger.warning(
            "actorrt's fork server is not available (%s): worker processes start as fresh "
            "interpreters from now on, which is slower", reason,
        )

    def live_workers(self) -> list[WorkerProcess]:
        """The workers that are connected and have not exited."""
        return [w for w in self._all.values() if w.conn is not None and w.alive]

    def worker(self, worker_id: str) -> WorkerProcess | None:
        return self._all.get(worker_id)

    async def acquire(self, key: WorkerKey, start_timeout: float = 60.0) -> WorkerProcess:
        """An idle worker with this key, or a new one once it has connected."""
        idle = self._idle.get(key)
        while idle:
            worker = idle.pop()
            if worker.alive and worker.conn is not None and not worker.conn.is_closing():
                worker.uses += 1
                return worker
        self._count += 1
        worker_id = f"{os.getpid()}.{self._count}"
        if key.node is not None:
            return await self._acquire_remote(key, worker_id, start_timeout)
        worker = WorkerProcess(key, worker_id)
        self._all[worker.worker_id] = worker
        worker.on_exit = self._exited
        starting = False
        try:
            try:
                if self.forks is None and not self._forks_off:
                    waiting_for(
                        "the fork server to start (it imports actorrt's worker side and "
                        f"{PRELOAD_VARIABLE}'s modules once)"
                    )
                forks = await self.fork_server_for(key)
                # Each start in flight may still open its two output pipes' read ends, a
                # pidfd and its connection: a start is refused while they might not fit,
                # rather than failing at the connection (a burst is checked as a whole).
                if near_fd_limit(STARTING_FDS * self._starting):
                    raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
                self._starting += 1
                starting = True
                await worker.start(
                    self.socket_path, self.secret_text, os.getpid(), self.boot_fields, forks
                )
            except OSError as exc:
                if out_of_fds(exc):
                    raise OSError(errno.EMFILE, fd_limit_message(exc)) from exc
                raise
            waiting_for(f"worker process {worker.pid} to start and connect to its runtime")
            worker.conn = await asyncio.wait_for(
                asyncio.shield(worker.connected), start_timeout
            )
        except BaseException:
            worker.kill()
            if not worker.has_reaper:  # it failed before its reaper began: nothing will reap
                self._all.pop(worker.worker_id, None)
                if worker.started:
                    reaping = asyncio.ensure_future(worker.wait())
                    self._reaping.add(reaping)
                    reaping.add_done_callback(self._reaping.discard)
                if not worker.exited.done():
                    worker.exited.set_result(-9)
            raise
        finally:
            self._starting -= starting
        worker.uses = 1
        self.watch.ensure_running()
        return worker

    async def _acquire_remote(
        self, key: WorkerKey, worker_id: str, start_timeout: float
    ) -> WorkerProcess:
        """A new worker on another node, started by its agent (``_remote_worker``)."""
        assert key.node is not None
        if self.node_starter is None:
            raise RuntimeError(f"node {key.node} is not reachable: this runtime has no cluster")
        worker = RemoteWorkerProcess(key, worker_id, self.node_starter(key.node))
        self._all[worker_id] = worker
        worker.on_exit = self._exited
        try:
            if self._remote_starts.locked():
                waiting_for(
                    f"a turn to start a worker on {worker.starter.where}: "
                    f"{REMOTE_STARTS_IN_FLIGHT} starts on other nodes are in flight, the most "
                    "this runtime connects at once"
                )
            async with self._remote_starts:
                boot = {**self.boot_fields, **self.remote_boot}
                waiting_for(f"the agent of {worker.starter.where} to start a worker process")
                await worker.start("", self.remote_secret, 0, boot)
                waiting_for(
                    f"worker process {worker.pid} on {worker.starter.where} to start and "
                    "connect to this runtime"
                )
                worker.conn = await asyncio.wait_for(
                    asyncio.shield(worker.connected), start_timeout
                )
        except BaseException:
            worker.kill()
            worker.exited_there(-9)
            self._all.pop(worker_id, None)
            raise
        worker.uses = 1
        self.watch.ensure_running()
        return worker

    def release(self, worker: WorkerProcess) -> None:
        """Take a worker back after its actor ended: pool it, or end it if it is spent."""
        if (
            worker.tainted
            or not worker.alive
            or worker.uses >= self.max_uses
            or sum(map(len, self._idle.values())) >= self.max_idle
        ):
            worker.kill()
            return
        worker.label = f"idle worker {worker.worker_id}"
        self._idle.setdefault(worker.key, []).append(worker)

    def _exited(self, worker: WorkerProcess, code: int) -> None:
        idle = self._idle.get(worker.key)
        if idle and worker in idle:
            idle.remove(worker)
        self._all.pop(worker.worker_id, None)
        if worker.hosted is not None:
            worker.hosted.process_exited(code)
        if code != 0 and not worker.kill_requested:
            logger.debug("worker %s exited with %s", worker.pid, describe_exit(code))

    def connected(self, worker_id: str, conn: Connection) -> bool:
        """A worker said hello on ``conn``; return whether we started it."""
        worker = self._all.get(worker_id)
        if worker is None or worker.connected.done():
            return False
        worker.conn = conn
        worker.connected.set_result(conn)
        return True

    async def shutdown(self) -> None:
        """Kill every worker's process group, wait until each is reaped and its temporary
        directory removed."""
        await self.watch.close()
        workers = list(self._all.values())
        for worker in workers:
            worker.kill()
        waits = [w.exited for w in workers if w.started]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        # Their temporary directories are gone by the time the runtime has ended.
        removals = [w.tmp_removed for w in workers if w.tmp_removed is not None]
        if removals:
            await asyncio.gather(*removals, return_exceptions=True)
        self._idle.clear()
        if self._forks_starting is not None:
            self._forks_starting.cancel()  # no-op once it has started
            await asyncio.gather(self._forks_starting, return_exceptions=True)
        if self.forks is not None:
            await self.forks.close()
