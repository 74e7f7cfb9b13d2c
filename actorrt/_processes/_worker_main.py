"""The worker process's main, run by a runtime's pool: in a child of its fork server, or in a
fresh interpreter (see :mod:`actorrt._processes._bootstrap`).

It reads one JSON line from stdin (the socket path, the secret, the owner's pid, its own id,
the owner's ``sys.path``, the owner's runtime id and the import path of the owner's runtime
class), connects back, and hosts actors until the owner closes the connection. The runtime
class arrives by name because this layer sits below the runtime and never imports it: the
worker runs what its owner runs (``actorrt._runtime._root:Runtime``), built through the
:class:`~actorrt._processes._services.WorkerRuntimeFactory` protocol.

Nothing it runs may outlive the owner:

- the worker itself dies with its owner through ``PR_SET_PDEATHSIG``, set before any import;
- everything it starts (subprocesses, DataLoader workers) shares its process group, which a
  small watcher process, forked here before any thread exists, kills once the owning
  *process* has exited (a pidfd, not the death of a thread: the sync facade runs the runtime
  on a thread). The watcher is a process of its own, so a worker whose thread holds the GIL
  in a long C call, or that is stopped, cannot hold it up; it also removes the socket that a
  killed owner leaves behind, and the worker's temporary directory.

A worker uses the temporary directory its owner made for it (the boot line's ``tmp``) as
``TMPDIR``, for ``tempfile`` here and in every process it starts; its owner removes it once
the worker has exited, and the watcher when the owner was killed first.

Nothing an actor runs may outlive the actor either: the worker is a child subreaper, and when
its hosted actor ends it kills every process that actor started, double-forked or in a
session of its own included (:mod:`actorrt._processes._descendants`); a thread the actor
left running cannot be killed, so then the worker tells its owner to retire it.

A worker whose connection to its runtime is lost (the owner died, or the connection broke)
ends what it started and exits with :data:`~actorrt._processes._bootstrap.RUNTIME_LOST`, so
an owner that is still there reports the lost connection, not a kill.

A worker that cannot connect (its runtime gone, its backlog full past the retry time) says
why on stderr and exits with :data:`~actorrt._processes._bootstrap.START_FAILED`, never with a
signal, so its owner does not mistake the failure for a kill.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import cast

import uvloop

from .._core._threads import keep_for_process
from .._wire import _auth, _tls
from .._wire._messages import Hello
from .._wire._refs import RefAddress
from .._wire._transport import connect_tcp, connect_unix
from ._bootstrap import RUNTIME_LOST, START_FAILED
from ._descendants import become_subreaper, end_descendants
from ._direct import PeerSide
from ._services import WorkerRuntimeFactory


def remove_socket(path: str) -> None:
    """Remove a dead owner's socket and its private directory (the owner, killed, could not);
    several workers may race to do it, so every step may already be done."""
    if not path:
        return  # a worker on a cluster node connects over TCP: there is no socket
    for remove, target in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
        try:
            remove(target)
        except OSError:
            pass


def _owner_check(owner_pid: int) -> tuple[Callable[[float | None], bool], int | None]:
    """A check ``owner_gone(within)`` that waits up to ``within`` seconds (``None``: for
    ever) for the owning process to exit, and the pidfd it uses (``None`` without pidfd)."""
    try:
        pidfd: int | None = os.pidfd_open(owner_pid)
    except (AttributeError, OSError):
        pidfd = None

    def owner_gone(within: float | None) -> bool:
        if pidfd is not None:
            return bool(select.select([pidfd], [], [], within)[0])
        deadline = None if within is None else time.monotonic() + within
        while os.getppid() == owner_pid:  # no pidfd: notice being re-parented
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    return owner_gone, pidfd


def watch_owner(
    owner_pid: int, socket_path: str, tmp: str | None = None
) -> tuple[Callable[[float | None], bool], int]:
    """Start the watcher that kills this process group once ``owner_pid`` has exited (and
    removes ``tmp``, the worker's temporary directory, which its owner can no longer do).

    Returns the check "has the owner exited?" and the watcher's pid (0: a thread watches,
    because no process could be forked).
    """
    owner_gone, pidfd = _owner_check(owner_pid)

    def kill_group() -> None:
        remove_socket(socket_path)
        if tmp:  # before the kill, which ends the watcher too
            shutil.rmtree(tmp, ignore_errors=True)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    try:
        watcher = os.fork()  # no thread exists yet: forking is safe here
    except OSError:
        watcher = -1
    if watcher == 0:
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # hold none of the worker's pipes open
                os.dup2(devnull, fd)
            owner_gone(None)
            kill_group()
        finally:
            os._exit(0)
    if watcher < 0:  # a thread then, which a GIL-holding actor can hold up

        def watch() -> None:
            owner_gone(None)
            kill_group()

        keep_for_process(
            threading.Thread(target=watch, name="actorrt-owner-watch", daemon=True)
        ).start()
        watcher = 0
    if pidfd is None and os.getppid() != owner_pid:
        kill_group()
    return owner_gone, watcher


def runtime_class(path: str) -> WorkerRuntimeFactory:
    """The runtime class named ``module:qualname`` (the owner's own)."""
    module, _, name = path.partition(":")
    target: object = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"the runtime class {path!r} of the boot line is not callable")
    return cast(WorkerRuntimeFactory, target)


def _process_thread() -> None:
    keep_for_process(threading.current_thread())


async def serve(boot: dict[str, object], connected: list[bool], watcher: int) -> None:
    # The loop's own threads (``asyncio.to_thread``) are the process's, kept across actors.
    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(
            thread_name_prefix="actorrt-worker", initializer=_process_thread
        )
    )
    runtime = runtime_class(str(boot["runtime_class"]))(shutdown_timeout=5.0)
    runtime.serve_as_worker()  # its owner grants, reserves and names for it
    async with runtime:
        workers = runtime.workers
        secret = _auth.secret_from_text(str(boot["secret"]))
        tcp = boot.get("tcp")
        if isinstance(tcp, list):  # a worker on a cluster node: its owner is elsewhere
            conn = await connect_tcp(
                str(tcp[0]), int(tcp[1]), secret, workers.dispatcher,
                tls=_tls.client_context() if boot.get("tls") else None, codec=workers.codec,
            )
        else:
            conn = await connect_unix(
                str(boot["socket"]), secret, workers.dispatcher, codec=workers.codec
            )
        worker_id = str(boot["worker_id"])
        workers.attach_owner(
            conn, RefAddress(str(boot["owner_runtime"]), worker_id),
            own_processes=(watcher,) if watcher > 0 else (),
        )
        workers.attach_peers(PeerSide.of_boot(boot, secret), worker_id)
        await conn.request(Hello(worker_id, os.getpid()))
        connected.append(True)
        await conn.wait_closed()


SCHED_VARIABLE = "ACTORRT_WORKER_SCHED"  # "batch" (the default) or "normal"


def set_scheduling_policy() -> None:
    """Run this worker under ``SCHED_BATCH`` on Linux, unless ``ACTORRT_WORKER_SCHED=normal``.

    Workers compute; their owner coordinates. Under the default policy a worker that a
    message wakes may preempt the process that sent it, so on a busy machine the owner's
    loop stops mid-write for each message it sends and every other worker waits for it.
    A ``SCHED_BATCH`` worker gets the same share of the CPU but waits for its turn instead
    (the scheduler's tick, or a free CPU). What the worker starts inherits the policy.
    """
    value = os.environ.get(SCHED_VARIABLE, "batch").strip().lower()
    if value not in ("batch", "normal"):
        raise ValueError(
            f"{SCHED_VARIABLE}={os.environ[SCHED_VARIABLE]!r}: expected 'batch' (the default) "
            "or 'normal'"
        )
    if value == "batch" and hasattr(os, "SCHED_BATCH"):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError:  # not allowed here (a seccomp profile): keep the default policy
            pass


def use_temporary_directory(tmp: object) -> str | None:
    """Make ``tmp`` (the owner's, see the module) this process's and its children's
    ``TMPDIR``."""
    if not isinstance(tmp, str) or not tmp:
        return None
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = None  # computed again from TMPDIR on next use
    return tmp


def main() -> None:
    try:
        set_scheduling_policy()
    except ValueError as exc:  # last: the owner quotes a failed start's last line
        print(f"actorrt worker {os.getpid()} cannot start: {exc}", file=sys.stderr, flush=True)
        os._exit(START_FAILED)
    boot = json.loads(sys.stdin.readline())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the user's code gets an empty stdin, not the bootstrap pipe
    os.close(devnull)
    sys.path[:] = [str(p) for p in boot["sys_path"]]
    socket_path = str(boot["socket"])
    tmp = use_temporary_directory(boot.get("tmp"))
    become_subreaper()  # what its actors start stays below it, double-forked or not
    owner_gone, watcher = watch_owner(int(boot["owner_pid"]), socket_path, tmp)
    connected: list[bool] = []
    code = RUNTIME_LOST
    try:
        uvloop.run(serve(boot, connected, watcher))
    except BaseException as exc:
        if not connected:  # a start failure: say why, and exit with a code, not a signal
            traceback.print_exc()
            where = boot.get("tcp") or socket_path
            print(  # last: the owner quotes a failed start's last line
                f"actorrt worker {os.getpid()} could not connect to its runtime at "
                f"{where}: {type(exc).__name__}: {exc}",
                file=sys.stderr,
                flush=True,
            )
            if watcher > 0:
                os.kill(watcher, signal.SIGKILL)
            os._exit(START_FAILED)
        traceback.print_exc()  # the runtime failed after connecting: say how
        code = 1
    finally:
        # The owner never closes a worker's connection (it kills the worker's group), so
        # the connection ended because the owner is dying or the connection broke: once the
        # owner is gone, tidy up after it.
        if owner_gone(1.0):
            remove_socket(socket_path)
            if tmp:  # as the watcher would: ending it below may come before it has
                shutil.rmtree(tmp, ignore_errors=True)
        # Nothing this worker started may outlive it, its watcher included. The worker then
        # exits with a code of its own, so that an owner still there is not told "SIGKILL".
        end_descendants()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
