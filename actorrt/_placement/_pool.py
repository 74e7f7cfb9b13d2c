"""Worker processes and their pool, seen from the runtime that owns them.

A worker is a fresh interpreter (never ``fork``) in its own process group, told over its stdin
where the runtime's socket is and the runtime's secret (stdin, not the environment, so the
secret does not leak into the worker's own children). It connects back, proves it knows the
secret, and hosts one resource-bearing actor at a time.

The interpreter runs :data:`BOOTSTRAP` with ``-P`` (no working directory on ``sys.path``):
before importing anything it asks the kernel to SIGKILL it when its parent goes
(``PR_SET_PDEATHSIG``, which needs no thread of the worker to run, so a worker holding the GIL
in a C call or stopped by SIGSTOP dies too), and it imports ``actorrt`` from the folder this
process imported it from, never from a same-named folder in the working directory. The
parent that death signal watches is the *thread* that started the worker: workers are started
from the runtime's event-loop thread, which lives as long as the runtime. Processes the worker
starts are ended by its own watcher (see :mod:`actorrt._placement._worker_main`).

Idle workers are pooled by the exact environment they were started with (``WorkerKey``):
a worker is reused only for an actor whose key matches, never after a crash or a kill, and
at most ``max_uses`` times, so interpreter start-up and heavy imports are paid once.

A worker's stdout and stderr reach this process's, each line prefixed with the actor it
hosts. When a worker exits, its whole process group is killed, so processes it started go
with it; the exit is reaped at once, leaving no zombie.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import errno
import json
import logging
import os
import resource
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

from .._wire._connection import Connection
from ._liveness import Liveness, LivenessWatch

logger = logging.getLogger("actorrt")

# The folder holding this process's ``actorrt`` package: workers import it from there.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Exit code of a worker that could not connect to its runtime (it says why on stderr).
START_FAILED = 3

# ``python -P -c BOOTSTRAP <owner pid> <package parent>``: see the module's docstring.
BOOTSTRAP = """\
import sys
owner, package = int(sys.argv[1]), sys.argv[2]
if sys.platform == "linux":
    import ctypes, os
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != owner:
        os._exit(1)  # the owner died before the line above: nobody waits for this worker
sys.path.insert(0, package)
import runpy
runpy.run_module("actorrt._placement._worker_main", run_name="__main__", alter_sys=True)
"""

# Variables that change how a process computes; a pooled worker must match them exactly.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


@dataclasses.dataclass(frozen=True)
class WorkerKey:
    """Everything a worker's environment is made of; equal keys may share a worker."""

    executable: str
    cwd: str
    sys_path: tuple[str, ...]
    cuda_visible_devices: str | None
    thread_variables: tuple[tuple[str, str], ...]
    worker_env: tuple[tuple[str, str], ...]

    @classmethod
    def current(cls, worker_env: Mapping[str, str], cuda_visible_devices: str | None) -> WorkerKey:
        return cls(
            executable=sys.executable,
            cwd=os.getcwd(),
            sys_path=tuple(sys.path),
            cuda_visible_devices=cuda_visible_devices,
            thread_variables=tuple(
                (name, worker_env.get(name) or os.environ[name])
                for name in THREAD_VARIABLES
                if name in worker_env or name in os.environ
            ),
            worker_env=tuple(sorted(worker_env.items())),
        )

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.worker_env)
        if self.cuda_visible_devices is not None:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = self.cuda_visible_devices
        env["PYTHONUNBUFFERED"] = "1"
        return env


class WorkerProcess:
    """One worker process: its OS process, its connection, who it hosts."""

    def __init__(self, key: WorkerKey, worker_id: str) -> None:
        self.key = key
        self.worker_id = worker_id
        self.proc: asyncio.subprocess.Process | None = None
        self.conn: Connection | None = None
        self.connected: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.label = f"worker {worker_id}"
        self.uses = 0
        self.tainted = False  # crashed, killed, or hosted an actor that did not end cleanly
        self.kill_requested = False
        self.on_exit: Callable[[WorkerProcess, int], None] | None = None
        self.hosted: Any = None  # the ProcessActor whose actor this worker runs now
        self._tasks: list[asyncio.Task[None]] = []
        self._early_stderr: collections.deque[str] = collections.deque(maxlen=10)
        self.liveness = Liveness()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(
        self,
        socket_path: str,
        secret_text: str,
        owner_pid: int,
        boot_fields: Mapping[str, str] | None = None,
    ) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            self.key.executable,
            "-P",
            "-c",
            BOOTSTRAP,
            str(owner_pid),
            PACKAGE_PARENT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.key.environment(),
            cwd=self.key.cwd,
            start_new_session=True,  # its own process group, killed as a whole
        )
        self._watch_exit()
        boot = {
            **(boot_fields or {}),
            "socket": socket_path,
            "secret": secret_text,
            "owner_pid": owner_pid,
            "worker_id": self.worker_id,
            "sys_path": list(self.key.sys_path),
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(boot).encode() + b"\n")
        await self.proc.stdin.drain()
        self.proc.stdin.close()
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._tasks = [
            loop.create_task(self._forward(self.proc.stdout, sys.stdout)),
            loop.create_task(self._forward(self.proc.stderr, sys.stderr)),
            loop.create_task(self._reap()),
        ]

    def _watch_exit(self) -> None:
        """Kill the group the moment the worker exits, before its pipes close.

        Processes the worker started may hold its stdout open, and asyncio's ``wait()``
        can wait for the pipes too: a pidfd tells us of the exit itself.
        """
        assert self.proc is not None
        try:
            pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            return  # no pidfd: connection loss and the reaper still end the group
        loop = asyncio.get_running_loop()

        def exited() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self.kill_group()
            if self.conn is not None:
                self.conn.abort()

        loop.add_reader(pidfd, exited)

    async def _forward(self, stream: asyncio.StreamReader, sink: Any) -> None:
        # Read the sink at each write: test capture and redirection replace sys.stdout.
        to_stdout = sink is sys.stdout
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line longer than the stream limit: pass it on in pieces
                line = await stream.read(1 << 16)
            if not line:
                return
            text = line.decode(errors="replace")
            if not to_stdout and not self.connected.done():
                self._early_stderr.append(text.rstrip("\n"))  # why a start failed
            out = sys.stdout if to_stdout else sys.stderr
            out.write(f"({self.label} pid={self.pid}) {text}")
            if not text.endswith("\n"):
                out.write("\n")
            out.flush()

    async def _reap(self) -> None:
        assert self.proc is not None
        code = await self.proc.wait()
        self.kill_group()  # whatever it started goes with it
        await asyncio.gather(*self._tasks[:2], return_exceptions=True)
        if not self.connected.done():
            said = next((line.strip() for line in reversed(self._early_stderr) if line.strip()), "")
            self.connected.set_exception(
                ConnectionError(
                    f"worker process {self.pid} failed to start: it exited with "
                    f"{describe_exit(code)} before connecting to its runtime"
                    + (f"; it said: {said}" if said else "")
                )
            )
            # Retrieved: a spawner still waiting gets it anyway; one that was cancelled
            # (its spawn withdrawn) must not make asyncio log it as never retrieved.
            self.connected.exception()
        if self.conn is not None:
            self.conn.abort()
        self.exited.set_result(code)
        if self.on_exit is not None:
            self.on_exit(self, code)

    def kill_group(self) -> None:
        """SIGKILL the worker's whole process group."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def kill(self) -> None:
        self.kill_requested = True
        self.tainted = True
        self.kill_group()

    @property
    def has_reaper(self) -> bool:
        return bool(self._tasks)

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self.exited.done()


def out_of_fds(exc: OSError) -> bool:
    """Whether starting a process failed for want of file descriptors. uvloop reports a
    failed socketpair as errno -1, so a failure near the limit counts too."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return True
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        return False
    return open_fds >= resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 16


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


def describe_exit(code: int) -> str:
    """Say how a process ended, from ``Popen.returncode`` (negative: a signal)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"signal {name}"
    return f"exit code {code}"


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
        self.watch = LivenessWatch(self.live_workers)

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
        worker = WorkerProcess(key, f"{os.getpid()}.{self._count}")
        self._all[worker.worker_id] = worker
        worker.on_exit = self._exited
        try:
            try:
                await worker.start(
                    self.socket_path, self.secret_text, os.getpid(), self.boot_fields
                )
            except OSError as exc:
                if out_of_fds(exc):
                    raise OSError(errno.EMFILE, fd_limit_message(exc)) from exc
                raise
            worker.conn = await asyncio.wait_for(
                asyncio.shield(worker.connected), start_timeout
            )
        except BaseException:
            worker.kill()
            if not worker.has_reaper:  # it failed before its reaper began: nothing will reap
                self._all.pop(worker.worker_id, None)
                if worker.proc is not None:
                    reaping = asyncio.ensure_future(worker.proc.wait())
                    self._reaping.add(reaping)
                    reaping.add_done_callback(self._reaping.discard)
                if not worker.exited.done():
                    worker.exited.set_result(-9)
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

    def idle_pids(self) -> list[int]:
        return [w.pid for ws in self._idle.values() for w in ws]

    def all_pids(self) -> list[int]:
        return [w.pid for w in self._all.values() if w.proc is not None]

    async def shutdown(self) -> None:
        """Kill every worker's process group and wait until each is reaped."""
        await self.watch.close()
        workers = list(self._all.values())
        for worker in workers:
            worker.kill()
        waits = [w.exited for w in workers if w.proc is not None]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        self._idle.clear()
