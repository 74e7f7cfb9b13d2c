"""One worker process, seen from the runtime that owns it (the pool keeps them: ``_pool``).

A worker is forked by the runtime's fork server (:mod:`actorrt._processes._forkserver`) when
the fork server can give it exactly its environment, or started as a fresh interpreter
(:mod:`actorrt._processes._bootstrap`). Either way it is in its own process group and told
on its stdin where the runtime's socket is and the runtime's secret (stdin, not the
environment, so the secret does not leak into the worker's own children). Its stdout and
stderr reach this process's, each line prefixed with the actor it hosts. When it exits, its
whole process group is killed, so processes it started go with it; the exit is reaped at
once (for a forked worker by the fork server, which reports the exit code here).

Each worker started here gets a temporary directory of its own (mode 0700, made here in the
temporary directory the worker's environment names), which it uses as ``TMPDIR``: what its
actors and their subprocesses leave in temporary files (a checkpoint folder of a trial that
was SIGKILLed half-way through saving, say) is removed with it once it has exited, however it
ended. Should the runtime itself be killed, the worker's watcher removes it
(:mod:`actorrt._processes._worker_main`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from .._wire._auth import SECRET_VARIABLES
from .._wire._connection import Connection
from .._wire._transport import make_private_dir
from ._bootstrap import RUNTIME_LOST, WORKER_MAIN, command
from ._forkserver import ForkServer, ForkUnavailable
from ._liveness import Liveness, process_state

logger = logging.getLogger("actorrt")

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
    node: str | None = None  # cluster mode: the node it runs on (None: this machine)

    @classmethod
    def current(
        cls,
        worker_env: Mapping[str, str],
        cuda_visible_devices: str | None,
        node: str | None = None,
    ) -> WorkerKey:
        return cls(
            node=node,
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
        """The worker's variables: this process's, less the cluster's token (a worker gets
        its secret on its stdin), then ``worker_env`` and the grant's."""
        env = {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}
        env.update(self.worker_env)
        if self.cuda_visible_devices is not None:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = self.cuda_visible_devices
        env["PYTHONUNBUFFERED"] = "1"
        return env


class WorkerProcess:
    """One worker process: its OS process, its connection, who it hosts."""

    remote = False  # started on another node by its agent (``_remote_worker``)
    where = ""  # for messages: "" here, " on node ..." for a remote one

    def __init__(self, key: WorkerKey, worker_id: str) -> None:
        self.key = key
        self.worker_id = worker_id
        self.proc: asyncio.subprocess.Process | None = None  # started the plain way
        self.forked = False  # forked by the fork server, which reaps it
        self._pid: int | None = None
        self._exit_code: asyncio.Future[int] | None = None  # a forked worker's, reported
        self.conn: Connection | None = None
        self.connected: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.label = f"worker {worker_id}"
        self.uses = 0
        self.tainted = False  # crashed, killed, or hosted an actor that did not end cleanly
        self.kill_requested = False
        self.gone_because: str | None = None  # known without its exit code (a node lost)
        self.on_exit: Callable[[WorkerProcess, int], None] | None = None
        self.hosted: Any = None  # the ProcessActor whose actor this worker runs now
        self._tasks: list[asyncio.Task[None]] = []
        self._early_stderr: collections.deque[str] = collections.deque(maxlen=10)
        self.liveness = Liveness()
        self.tmp: str | None = None  # its TMPDIR, removed once it has exited (see the module)
        self.tmp_removed: asyncio.Future[None] | None = None  # that removal, when off the loop

    @property
    def pid(self) -> int:
        assert self._pid is not None
        return self._pid

    @property
    def started(self) -> bool:
        return self._pid is not None

    def boot_line(
        self,
        socket_path: str,
        secret_text: str,
        owner_pid: int,
        boot_fields: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What the worker reads first on its stdin (``_worker_main``): where its runtime
        is, the secret, the process whose end is its own, its id and ``sys.path``."""
        return {
            **(boot_fields or {}),
            "socket": socket_path,
            "secret": secret_text,
            "owner_pid": owner_pid,
            "worker_id": self.worker_id,
            "sys_path": list(self.key.sys_path),
        }

    async def start(
        self,
        socket_path: str,
        secret_text: str,
        owner_pid: int,
        boot_fields: Mapping[str, str] | None = None,
        forks: ForkServer | None = None,
    ) -> None:
        """Start the worker: forked by ``forks`` when given and able, else the plain way."""
        boot = self.boot_line(socket_path, secret_text, owner_pid, boot_fields)
        env = self.key.environment()
        self.tmp = boot["tmp"] = make_private_dir(
            f"actorrt-worker-{self.worker_id}-", env.get("TMPDIR") or tempfile.gettempdir()
        )
        try:
            await self._start(boot, env, owner_pid, forks)
        except BaseException:
            if self._pid is None:  # no process: nobody else will remove it
                self._remove_tmp()
            raise

    async def _start(
        self,
        boot: dict[str, Any],
        env: dict[str, str],
        owner_pid: int,
        forks: ForkServer | None,
    ) -> None:
        if forks is not None:
            try:
                forked = await forks.fork(self.worker_id, env, self.key.cwd, boot)
            except ForkUnavailable as exc:
                logger.debug("worker %s starts the plain way: %s", self.worker_id, exc)
            else:
                self.forked = True
                self._pid = forked.pid
                self._exit_code = forked.exited
                self._watch_exit()
                try:
                    stdout = await _pipe_reader(forked.stdout)
                except BaseException:
                    os.close(forked.stderr)
                    raise
                stderr = await _pipe_reader(forked.stderr)
                self._begin(stdout, stderr)
                return
        self.proc = await asyncio.create_subprocess_exec(
            *command(self.key.executable, owner_pid, WORKER_MAIN),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.key.cwd,
            start_new_session=True,  # its own process group, killed as a whole
        )
        self._pid = self.proc.pid
        self._watch_exit()
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(boot).encode() + b"\n")
        await self.proc.stdin.drain()
        self.proc.stdin.close()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._begin(self.proc.stdout, self.proc.stderr)

    def _begin(self, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._forward(stdout, sys.stdout)),
            loop.create_task(self._forward(stderr, sys.stderr)),
            loop.create_task(self._reap()),
        ]

    def _watch_exit(self) -> None:
        """Kill the group the moment the worker exits, before its pipes close.

        Processes the worker started may hold its stdout open, and asyncio's ``wait()``
        can wait for the pipes too: a pidfd (which works for a process that is not our
        child, as a forked worker is) tells us of the exit itself.
        """
        try:
            pidfd = os.pidfd_open(self.pid)
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

    async def wait(self) -> int:
        """The exit code once the process is reaped (minus the signal that ended it)."""
        if self.proc is not None:
            return await self.proc.wait()
        assert self._exit_code is not None
        return await self._exit_code

    async def _reap(self) -> None:
        code = await self.wait()
        self.kill_group()  # whatever it started goes with it
        await asyncio.gather(*self._tasks[:2], return_exceptions=True)
        self._ended(code)

    def _ended(self, code: int) -> None:
        """The process is gone (exit code ``code``): fail a start still waiting, say so."""
        if not self.connected.done():
            said = next((line.strip() for line in reversed(self._early_stderr) if line.strip()), "")
            how = self.gone_because or (
                f"it exited with {describe_exit(code)} before connecting to its runtime"
                + (f"; it said: {said}" if said else "")
            )
            self.connected.set_exception(
                ConnectionError(f"worker process {self.pid}{self.where} failed to start: {how}")
            )
            # Retrieved: a spawner still waiting gets it anyway; one that was cancelled
            # (its spawn withdrawn) must not make asyncio log it as never retrieved.
            self.connected.exception()
        if self.conn is not None:
            self.conn.abort()
        self._remove_tmp()
        self.exited.set_result(code)
        if self.on_exit is not None:
            self.on_exit(self, code)

    def _remove_tmp(self) -> None:
        """Remove the worker's temporary directory: at once when empty (the usual case),
        else off the loop, as it may hold much (``tmp_removed`` is then that removal)."""
        tmp, self.tmp = self.tmp, None
        if tmp is None:
            return
        try:
            os.rmdir(tmp)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass  # not empty
        try:
            self.tmp_removed = asyncio.get_running_loop().run_in_executor(
                None, shutil.rmtree, tmp, True
            )
        except RuntimeError:  # no loop, or its executor has shut down: here, then
            shutil.rmtree(tmp, ignore_errors=True)

    def process_state(self) -> str:
        """Its one-letter state in ``/proc`` (``T``: stopped); ``?`` if unknown."""
        return process_state(self.pid)

    def kill_group(self) -> None:
        """SIGKILL the worker's whole process group."""
        if self._pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pid, signal.SIGKILL)

    def kill(self) -> None:
        self.kill_requested = True
        self.tainted = True
        self.kill_group()

    @property
    def has_reaper(self) -> bool:
        return bool(self._tasks)

    @property
    def alive(self) -> bool:
        return self._pid is not None and not self.exited.done()


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    """A stream reading the pipe ``fd`` (taken over: closed with the stream)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 16, loop=loop)
    # uvloop's pipe transport closes the descriptor itself, then closes the file object it
    # was given as well: a second close() of the same number, which closes whatever another
    # thread of this process opened under that number in between (a Tune storage thread's
    # file). So under uvloop the file object does not own the descriptor; asyncio's
    # transport closes it only through the file object, which then does.
    by_loop = type(loop).__module__.startswith("uvloop")
    pipe = os.fdopen(fd, "rb", buffering=0, closefd=not by_loop)
    connecting = loop.create_task(
        loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    )
    try:
        # Shielded: cancelled half-way, the loop may or may not own the pipe already, and
        # closing it here could close a descriptor number that was reused meanwhile.
        await asyncio.shield(connecting)
    except asyncio.CancelledError:
        connecting.add_done_callback(functools.partial(_close_connected, pipe, by_loop))
        raise
    except BaseException:
        _close_unconnected(pipe, by_loop)
        raise
    return reader


def _close_connected(pipe: Any, by_loop: bool, connecting: asyncio.Task[Any]) -> None:
    """After a cancelled start: close the pipe through its transport, or itself."""
    if not connecting.cancelled() and connecting.exception() is None:
        transport, _ = connecting.result()
        transport.close()
    else:
        _close_unconnected(pipe, by_loop)


def _close_unconnected(pipe: Any, by_loop: bool) -> None:
    """Close a pipe that no transport took (its file object may not own the descriptor)."""
    fd = pipe.fileno()
    pipe.close()
    if by_loop:
        with contextlib.suppress(OSError):
            os.close(fd)


def describe_exit(code: int) -> str:
    """Say how a process ended, from ``Popen.returncode`` (negative: a signal)."""
    if code == RUNTIME_LOST:
        return f"exit code {code}: the worker lost its connection to the runtime"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"signal {name}"
    return f"exit code {code}"
