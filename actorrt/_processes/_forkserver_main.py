"""The fork server's process: a template that forks worker processes on request.

Started once per runtime by :class:`~actorrt._processes._forkserver.ForkServer` the plain way
(``python -P -c BOOTSTRAP``: ``PR_SET_PDEATHSIG``, ``actorrt`` imported from its owner's
folder). Its stdin is its control socket (``SOCK_SEQPACKET``: one message per datagram,
file descriptors attached with ``SCM_RIGHTS``). It reads its boot message (the owner's
``sys.path``, the runtime class, the modules to preload), imports the worker side of
``actorrt`` and those modules, answers ``{"ready": pid}`` (or ``{"error": text}``), and then
serves, one message at a time:

- ``{"fork": worker_id, "env": {...}, "cwd": ..., "boot": {...}}`` with the write ends of the
  worker's stdout and stderr pipes attached: it forks; it answers ``{"forked": worker_id,
  "pid": pid}`` or ``{"failed": worker_id, "error": text}``;
- for every child it reaps, it says ``{"exited": pid, "code": code}`` (a negative code: the
  signal that ended it, as ``Popen.returncode``).

It never starts a thread or an event loop, and it checks before each fork that it has one
thread: a fork copies only the forking thread, so a lock another thread held would stay
held for ever in the child. When its control socket closes (its owner closed it or died),
it exits, and the children it still has die with it.

The child becomes a worker exactly as a fresh one does (:mod:`actorrt._processes._worker_main`
runs as ``__main__``, reading its boot line from stdin), after it has put itself in a new
session and process group, asked to be SIGKILLed when the fork server goes
(``PR_SET_PDEATHSIG``; a child of a fork server that died meanwhile exits at once), and
applied its environment: variables, working directory and standard streams, before anything
runs that reads them.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import traceback
import types
from typing import Any

from ._bootstrap import START_FAILED, WORKER_MAIN

MAX_MESSAGE = 1 << 20  # a fork request carries the whole environment


def thread_count() -> int:
    """The threads of this process, as the kernel counts them."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: trust the interpreter's count
        import threading

        return threading.active_count()


def send(ctl: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the owner is gone: the read loop notices
        ctl.send(json.dumps(message).encode())


class WorkerMain:
    """The worker's main module, compiled once, to run as ``__main__`` in each child."""

    def __init__(self) -> None:
        importlib.import_module(WORKER_MAIN)
        # Each child runs it as ``__main__``, as a fresh worker does: only what it imports
        # stays imported here.
        del sys.modules[WORKER_MAIN]
        spec = importlib.util.find_spec(WORKER_MAIN)
        assert spec is not None and spec.loader is not None
        self.spec = spec
        self.code = spec.loader.get_code(WORKER_MAIN)  # type: ignore[attr-defined]

    def run(self) -> None:
        """What ``runpy.run_module(WORKER_MAIN, run_name="__main__", alter_sys=True)`` does,
        without compiling the module again in every child."""
        spec = self.spec
        main = types.ModuleType("__main__")
        main.__dict__.update(
            __file__=spec.origin, __cached__=spec.cached, __loader__=spec.loader,
            __package__=spec.parent, __spec__=spec,
        )
        sys.modules["__main__"] = main
        sys.argv[0] = spec.origin or sys.argv[0]
        exec(self.code, main.__dict__)


def preload(sys_path: list[str], runtime_class: str, modules: list[str]) -> WorkerMain:
    """Import the worker's side of actorrt (and its runtime class) and the user's modules."""
    sys.path[:] = sys_path
    worker_main = WorkerMain()
    importlib.import_module(runtime_class.partition(":")[0])
    for name in modules:
        importlib.import_module(name)
    return worker_main


class Server:
    """The template's one loop: fork requests in, exits out."""

    def __init__(self, ctl: socket.socket, worker_main: WorkerMain) -> None:
        self.ctl = ctl
        self.worker_main = worker_main
        self.pid = os.getpid()
        self.children: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def serve(self) -> None:
        """Serve until the control socket closes. The owner closes it once every worker is
        reaped; if it closes early (the owner died), the children left die with this
        process (``PR_SET_PDEATHSIG``), and their watchers end what they started and
        remove the dead owner's socket."""
        while True:
            readable, _, _ = select.select([self.ctl.fileno(), self.wake_r], [], [])
            if self.wake_r in readable:
                with contextlib.suppress(OSError):
                    while os.read(self.wake_r, 512):
                        pass
                self.reap()
            if self.ctl.fileno() in readable:
                data, fds, _, _ = socket.recv_fds(self.ctl, MAX_MESSAGE, 8)
                if not data:
                    return
                self.fork(json.loads(data), fds)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            send(self.ctl, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})

    def fork(self, request: dict[str, Any], fds: list[int]) -> None:
        worker_id = str(request["fork"])
        try:
            threads = thread_count()
            if threads != 1:
                raise RuntimeError(
                    f"the fork server has {threads} threads (a preloaded module started "
                    "them): forking it would be unsafe"
                )
            if len(fds) != 2:
                raise RuntimeError(f"a fork request needs 2 descriptors, got {len(fds)}")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except Exception as exc:
            for fd in fds:
                os.close(fd)
            send(self.ctl, {"failed": worker_id, "error": f"{type(exc).__name__}: {exc}"})
            return
        if pid == 0:
            self.become_worker(request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        send(self.ctl, {"forked": worker_id, "pid": pid})

    def become_worker(self, request: dict[str, Any], fds: list[int]) -> None:
        """In the child: set it up as a worker, then run the worker's main."""
        code = START_FAILED
        try:
            # First of all, the template's own descriptors go: nothing but the template may
            # hold its control socket (a worker that shut it down would end the template and
            # every worker forked from it), nor its signal pipe.
            self.ctl.close()
            signal.set_wakeup_fd(-1)
            for fd in (self.wake_r, self.wake_w):
                os.close(fd)
            os.setsid()  # its own session and process group, killed as a whole
            _libc().prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
            if os.getppid() != self.pid:
                os._exit(1)  # the fork server died before the line above
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            boot = json.dumps(request["boot"]).encode() + b"\n"
            boot_r, boot_w = os.pipe()
            if len(boot) > 1 << 16:  # it must fit the pipe: nobody reads it yet
                fcntl.fcntl(boot_w, fcntl.F_SETPIPE_SZ, len(boot))
            os.write(boot_w, boot)
            os.close(boot_w)
            for source, target in ((boot_r, 0), (fds[0], 1), (fds[1], 2)):
                os.dup2(source, target)
                os.close(source)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(str(request["cwd"]))
            reseed()
            code = 0
            self.worker_main.run()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = START_FAILED
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

def reseed() -> None:
    """Give a preloaded random generator its own seed in each worker, as a fresh process has."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "seed"):
        torch.seed()


@functools.cache
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None)


def main() -> None:
    ctl = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # children get their boot line there, not the control socket
    os.close(devnull)
    boot = json.loads(ctl.recv(MAX_MESSAGE))
    try:
        worker_main = preload(
            [str(p) for p in boot["sys_path"]], str(boot["runtime_class"]),
            [str(m) for m in boot["preload"]],
        )
        _libc()  # loaded now, not in each child
        threads = thread_count()
        if threads != 1:
            raise RuntimeError(
                f"after preloading {boot['preload']} the fork server has {threads} threads "
                "(OpenBLAS and OpenMP start theirs at import unless their thread counts, "
                "OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, are 1): forking it would be unsafe"
            )
    except BaseException as exc:
        send(ctl, {"error": f"{type(exc).__name__}: {exc}"})
        return
    gc.collect()
    gc.freeze()  # what the template imported stays shared with the children
    server = Server(ctl, worker_main)
    send(ctl, {"ready": os.getpid()})
    server.serve()


if __name__ == "__main__":
    main()
