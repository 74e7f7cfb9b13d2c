"""The worker process: ``python -m actorrt._worker``, started by a runtime's pool.

It reads one JSON line from stdin (the socket path, the secret, the owner's pid, its own id,
the owner's ``sys.path``), watches the owning *process* (not a thread of it: the sync facade
runs the runtime on a thread), connects back, and hosts actors until the owner closes the
connection. When the owner dies, a watchdog thread kills this worker's whole process group,
so the worker and everything it started (subprocesses, DataLoader workers) go with it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

import uvloop

from . import _auth
from ._runtime import Runtime
from ._transport import connect_unix


def remove_socket(path: str) -> None:
    """Remove a dead owner's socket and its private directory (the owner, killed, could not);
    several workers may race to do it, so every step may already be done."""
    for remove, target in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
        try:
            remove(target)
        except OSError:
            pass


def watch_owner(owner_pid: int, socket_path: str) -> Callable[[float], bool]:
    """Kill this process group once the process ``owner_pid`` has exited, removing the
    socket it leaves behind. Returns a check: has the owner exited?"""

    def kill_group() -> None:
        remove_socket(socket_path)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    try:
        pidfd = os.pidfd_open(owner_pid)
    except (AttributeError, OSError):
        pidfd = None

    def owner_gone(within: float) -> bool:
        if pidfd is not None:
            return bool(select.select([pidfd], [], [], within)[0])
        return os.getppid() != owner_pid

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])  # readable once the owner has exited
        else:  # no pidfd: notice being re-parented
            while os.getppid() == owner_pid:
                time.sleep(0.2)
        kill_group()

    if pidfd is None and os.getppid() != owner_pid:
        kill_group()
    threading.Thread(target=watch, name="actorrt-owner-watch", daemon=True).start()
    return owner_gone


async def serve(boot: dict[str, object]) -> None:
    runtime = Runtime(shutdown_timeout=5.0)
    runtime.discoverable = False  # `actorrt status` shows the owner, which knows this one
    async with runtime:
        workers = runtime.workers
        secret = _auth.secret_from_text(str(boot["secret"]))
        conn = await connect_unix(
            str(boot["socket"]), secret, workers.host.handle, codec=workers.codec
        )
        workers.attach_owner(conn)
        await conn.request(("hello", boot["worker_id"], os.getpid()))
        await conn.wait_closed()


def main() -> None:
    boot = json.loads(sys.stdin.readline())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the user's code gets an empty stdin, not the bootstrap pipe
    os.close(devnull)
    sys.path[:] = [str(p) for p in boot["sys_path"]]
    owner_gone = watch_owner(int(boot["owner_pid"]), str(boot["socket"]))
    try:
        uvloop.run(serve(boot))
    finally:
        # The owner never closes a worker's connection (it kills the worker's group), so
        # the connection ended because the owner is dying: once it is gone, tidy up after it.
        if owner_gone(1.0):
            remove_socket(str(boot["socket"]))
        # The owner is gone or let us go: nothing this worker started may outlive it.
        os.killpg(os.getpgid(0), signal.SIGKILL)


if __name__ == "__main__":
    main()
