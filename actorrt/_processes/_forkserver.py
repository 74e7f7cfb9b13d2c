"""The fork server, seen from the runtime that owns it: workers started in milliseconds.

A fresh interpreter takes a good part of a second to import actorrt's worker side. So the
pool starts one template process per runtime, the first time it needs a worker: a fresh
interpreter started the plain way (:mod:`actorrt._processes._bootstrap`), which imports the
worker side once, and the modules named in ``ACTORRT_WORKER_PRELOAD``, and then forks a
worker on each request (:mod:`actorrt._processes._forkserver_main`). It never has a thread
or an event loop when it forks; each child makes its own uvloop loop.

The template is the parent of the workers it forks, reaps them and reports each exit code
here, over its control socket (a ``SOCK_SEQPACKET`` socket pair, its stdin). The worker's
stdout and stderr are pipes made here, their write ends passed to the template with
``SCM_RIGHTS``, so the pool forwards their lines as it does a spawned worker's.

A worker is forked only when the template can give it exactly the environment it would have
had as a fresh interpreter (:meth:`ForkServer.can_fork`): the same Python executable and
``sys.path``, no difference in the ``PYTHON*`` variables the interpreter reads at start-up;
and when modules were preloaded, which may have read any variable (thread counts, CUDA) at
import, the very environment and working directory the template started with. Anything else
starts the plain way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from importlib.util import find_spec
from typing import Any

from .._core._spawn_progress import waiting_for
from ._bootstrap import FORKSERVER_MAIN, command

logger = logging.getLogger("actorrt")

PRELOAD_VARIABLE = "ACTORRT_WORKER_PRELOAD"  # modules the template imports: "torch,numpy"
DISABLE_VARIABLE = "ACTORRT_FORKSERVER"  # "0": every worker starts as a fresh interpreter
START_TIMEOUT = 120.0  # seconds the template may take to import what it preloads
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


Answer = tuple[int, "asyncio.Future[int]"]  # a fork request's: the pid, the future of its exit


class ForkUnavailable(Exception):
    """The fork server cannot start this worker (the pool starts it the plain way)."""


def fork_server_enabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "1").strip() != "0"


def preload_modules(value: str | None = None) -> tuple[str, ...]:
    """The modules ``ACTORRT_WORKER_PRELOAD`` names (comma-separated), checked to exist here.

    Raises:
        ValueError: a name that is not a module name, or a module that cannot be found.
    """
    text = os.environ.get(PRELOAD_VARIABLE, "") if value is None else value
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        if not _MODULE_NAME.match(name):
            raise ValueError(
                f"{PRELOAD_VARIABLE}={text!r}: {name!r} is not a module name; give "
                "importable module names separated by commas, e.g. 'torch,numpy'"
            )
        if find_spec(name.partition(".")[0]) is None:
            raise ValueError(
                f"{PRELOAD_VARIABLE}={text!r}: no module named {name.partition('.')[0]!r} "
                "can be imported here, so worker processes could not import it either"
            )
    return names


def _wake(writable: asyncio.Future[None]) -> None:
    if not writable.done():
        writable.set_result(None)


class Forked:
    """A worker the template forked: its pid, the read ends of its output pipes, its exit."""

    __slots__ = ("exited", "pid", "stderr", "stdout")

    def __init__(self, pid: int, stdout: int, stderr: int, exited: asyncio.Future[int]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.exited = exited  # the exit code (minus the signal), as the template reaped it


class ForkServer:
    """One runtime's template process, and the requests in flight to it."""

    def __init__(
        self,
        executable: str,
        cwd: str,
        sys_path: Sequence[str],
        env: Mapping[str, str],
        preload: Sequence[str],
    ) -> None:
        self.executable = executable
        self.cwd = cwd
        self.sys_path = tuple(sys_path)
        self.env = dict(env)
        self.preload = tuple(preload)
        self.proc: asyncio.subprocess.Process | None = None
        self.lost_reason: str | None = None  # set once it cannot serve any more
        self.on_lost: Callable[[str], None] | None = None
        self._ctl: socket.socket | None = None
        self._ready: asyncio.Future[int] | None = None
        # Per fork request: its answer (the pid and the future of its exit), its pipes' ends.
        self._pending: dict[str, tuple[asyncio.Future[Answer], int, int]] = {}
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._sending = asyncio.Lock()  # held by the one request being sent
        self._writable: asyncio.Future[None] | None = None  # what that request waits for
        self.queued = 0  # requests not yet sent: waiting for their turn or for room

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def start(self, runtime_class: str, owner_pid: int) -> None:
        """Start the template and wait until it has imported everything.

        Raises:
            ForkUnavailable: it could not start, or said why it cannot fork.
        """
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *command(self.executable, owner_pid, FORKSERVER_MAIN),
                stdin=theirs.fileno(),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=None,  # what the template itself says goes to the owner's stderr
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        except BaseException as exc:
            ours.close()  # a template already started reads the end of its socket: it exits
            if isinstance(exc, OSError):
                raise ForkUnavailable(f"it could not be started: {exc}") from exc
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._ctl = ours
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        boot = {"sys_path": list(self.sys_path), "runtime_class": runtime_class,
                "preload": list(self.preload)}
        ours.send(json.dumps(boot).encode())
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), START_TIMEOUT)
        except TimeoutError:
            self._lose(f"it did not start within {START_TIMEOUT:.0f} s")
        except ForkUnavailable:
            pass
        if self.lost_reason is not None:
            await self.close()
            raise ForkUnavailable(self.lost_reason)

    def can_fork(self, executable: str, sys_path: Sequence[str], cwd: str,
                 env: Mapping[str, str]) -> bool:
        """Whether a worker forked from the template gets exactly this environment."""
        if self.lost_reason is not None or executable != self.executable:
            return False
        if tuple(sys_path) != self.sys_path:
            return False
        if self.preload:  # a preloaded module may have read any variable at import
            return cwd == self.cwd and dict(env) == self.env
        return all(
            env.get(name) == self.env.get(name)
            for name in {*env, *self.env}
            if name.startswith("PYTHON")
        )

    async def fork(self, worker_id: str, env: Mapping[str, str], cwd: str,
                   boot: Mapping[str, Any]) -> Forked:
        """Have the template fork a worker; its boot line reaches it on its stdin.

        Raises:
            ForkUnavailable: the template could not fork it (the pool starts it the plain way).
        """
        loop = asyncio.get_running_loop()
        forked: asyncio.Future[Answer] = loop.create_future()
        request = json.dumps(
            {"fork": worker_id, "env": dict(env), "cwd": cwd, "boot": dict(boot)}
        ).encode()
        waiting_for(
            f"its turn to send a fork request to the fork server (pid {self.pid}; "
            f"{self.queued} request(s) ahead of it, {len(self._pending)} sent and not yet "
            "answered)"
        )
        self.queued += 1
        try:
            # One request at a time: the socket has one writer callback, and each request's
            # pipes are made only once it is its turn, so a burst waiting here holds none.
            async with self._sending:
                ctl = self._ctl
                if ctl is None or self.lost_reason is not None:
                    raise ForkUnavailable(self.lost_reason or "it is not running")
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                self._pending[worker_id] = (forked, out_r, err_r)
                try:
                    await self._send(ctl, request, [out_w, err_w])
                except BaseException as exc:
                    if self._pending.pop(worker_id, None) is not None:
                        for fd in (out_r, err_r):
                            os.close(fd)
                    if isinstance(exc, OSError):
                        raise ForkUnavailable(f"the request could not be sent: {exc}") from exc
                    raise
                finally:
                    os.close(out_w)
                    os.close(err_w)
        finally:
            self.queued -= 1
        waiting_for(
            f"the fork server (pid {self.pid}) to fork its worker process "
            f"({len(self._pending)} fork request(s) sent and not yet answered)"
        )
        try:
            pid, exited = await forked
        except BaseException:
            if self._pending.pop(worker_id, None) is not None or not forked.done():
                for fd in (out_r, err_r):
                    os.close(fd)
            raise
        return Forked(pid, out_r, err_r, exited)

    async def _send(self, ctl: socket.socket, data: bytes, fds: list[int]) -> None:
        """Send one request, waiting while the socket is full (one sender at a time)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                socket.send_fds(ctl, [data], fds)
                return
            except BlockingIOError:
                writable: asyncio.Future[None] = loop.create_future()
                self._writable = writable
                loop.add_writer(ctl.fileno(), _wake, writable)
                try:
                    await writable  # or ForkUnavailable, once the template is lost
                finally:
                    self._writable = None
                    if self._ctl is ctl:
                        loop.remove_writer(ctl.fileno())
            if self._ctl is not ctl:
                raise ForkUnavailable(self.lost_reason or "it is not running")

    def _readable(self) -> None:
        ctl = self._ctl
        if ctl is None:
            return
        while True:
            try:
                data = ctl.recv(1 << 16)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lose(f"its control socket failed: {exc}")
                return
            if not data:
                self._lose("it exited")
                return
            self._received(json.loads(data))

    def _received(self, message: dict[str, Any]) -> None:
        if "exited" in message:
            exited = self._exits.pop(int(message["exited"]), None)
            if exited is not None and not exited.done():
                exited.set_result(int(message["code"]))
        elif "forked" in message:
            pending = self._pending.pop(str(message["forked"]), None)
            pid = int(message["pid"])
            exited = self._exits[pid] = asyncio.get_running_loop().create_future()
            if pending is not None and not pending[0].done():
                pending[0].set_result((pid, exited))
            elif pending is None or pending[0].cancelled():
                with contextlib.suppress(OSError):  # its requester gave up: end it
                    os.killpg(pid, signal.SIGKILL)
        elif "failed" in message:
            pending = self._pending.pop(str(message["failed"]), None)
            if pending is not None:
                for fd in pending[1:]:
                    os.close(fd)
                if not pending[0].done():
                    pending[0].set_exception(ForkUnavailable(str(message["error"])))
        elif "ready" in message:
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(int(message["ready"]))
        elif "error" in message:
            self._lose(f"it could not prepare: {message['error']}")

    def _lose(self, reason: str) -> None:
        """The template cannot serve any more: fail what waits on it.

        Its children die with it (``PR_SET_PDEATHSIG``), so each is reported as killed.
        """
        if self.lost_reason is None:
            self.lost_reason = reason
        if self._ctl is not None:
            loop = asyncio.get_running_loop()
            loop.remove_reader(self._ctl.fileno())
            if self._writable is not None:  # a request waits for room to send: it fails
                loop.remove_writer(self._ctl.fileno())
                if not self._writable.done():
                    self._writable.set_exception(ForkUnavailable(self.lost_reason))
            self._ctl.close()
            self._ctl = None
        failure = ForkUnavailable(self.lost_reason)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(failure)
            self._ready.exception()
        pending, self._pending = self._pending, {}
        for forked, out_r, err_r in pending.values():
            for fd in (out_r, err_r):
                os.close(fd)
            if not forked.done():
                forked.set_exception(failure)
                forked.exception()  # retrieved: a request given up meanwhile awaits it no more
        exits, self._exits = self._exits, {}
        for pid, exited in exits.items():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            if not exited.done():
                exited.set_result(-signal.SIGKILL)
        if self.on_lost is not None:
            self.on_lost(self.lost_reason)

    async def close(self) -> None:
        """End the template (it kills and reaps the children it still has) and reap it."""
        self.on_lost = None  # an end asked for is not news
        if self.lost_reason is None:
            self.lost_reason = "its runtime closed it"
        if self._ctl is not None:
            self._lose(self.lost_reason)
        if self.proc is None:
            return
        ready = self._ready is not None and self._ready.done() and not self._ready.exception()
        if not ready:  # still importing: it would read the end of its socket only after
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
