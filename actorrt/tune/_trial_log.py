"""The per-trial log: a trial process's stdout and stderr, copied into the trial's folder.

While a trial runs, file descriptors 1 and 2 of its worker process point at pipes; a
thread per pipe copies what arrives both to where the descriptor pointed before (the pipe
to the driver, which shows it on the driver's console prefixed with the worker's name) and
to ``<trial folder>/output.log``. Working at the descriptor level catches everything the
process writes: ``print``, logging handlers on ``sys.stderr``, C extensions, and programs
the trial runs with ``subprocess``.

One trial runs in a worker process at a time, so the whole process's output while it runs
is that trial's. The descriptors are put back when the trial's attempt ends, after the
copying threads have written everything out, so the log is complete when the controller
hears that the attempt ended.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

__all__ = ["LOG_FILE", "trial_output"]

LOG_FILE = "output.log"
_DRAIN_WAIT_S = 5.0  # how long to wait for a child process still holding the pipe
_MAX_PARTIAL = 1 << 16  # a line this long goes to the log before its end comes


class _Tee:
    """Copies one pipe to a descriptor and to the shared log file."""

    def __init__(self, fd: int, log: _Log) -> None:
        self.fd = fd
        self.log = log
        self.saved = os.dup(fd)
        try:
            read, write = os.pipe()
        except OSError:
            os.close(self.saved)
            raise
        self.read = read
        os.dup2(write, fd)
        os.close(write)
        self.thread = threading.Thread(
            target=self._copy, name=f"actorrt-trial-log-{fd}", daemon=True
        )
        self.thread.start()

    def _copy(self) -> None:
        # The log gets whole lines, so stdout's and stderr's lines do not cut into each
        # other there (print writes its pieces one by one, unbuffered in a worker).
        partial = b""
        try:
            while True:
                data = os.read(self.read, 1 << 16)
                if not data:
                    if partial:
                        self.log.write(partial)
                    return
                lines, _, partial = (partial + data).rpartition(b"\n")
                if lines:
                    self.log.write(lines + b"\n")
                if len(partial) >= _MAX_PARTIAL:
                    self.log.write(partial)
                    partial = b""
                view = memoryview(data)
                while view:
                    try:
                        written = os.write(self.saved, view)
                    except OSError:  # the driver's end is gone: keep the log going
                        break
                    view = view[written:]
        finally:
            os.close(self.read)
            os.close(self.saved)
            self.log.done()

    def restore(self) -> None:
        """Point the descriptor back where it was; the pipe then ends for the thread
        (unless a child process still holds it)."""
        os.dup2(self.saved, self.fd)


class _Log:
    """The log file, written by two threads, closed by the last one to finish."""

    def __init__(self, path: str, writers: int) -> None:
        self.file = open(path, "ab")  # noqa: SIM115 (closed by the last writer's thread)
        self.lock = threading.Lock()
        self.writers = writers

    def write(self, data: bytes) -> None:
        with self.lock:
            self.file.write(data)
            self.file.flush()

    def done(self) -> None:
        with self.lock:
            self.writers -= 1
            if self.writers == 0:
                self.file.close()


@contextlib.contextmanager
def trial_output(path: str) -> Iterator[None]:
    """While the block runs, copy this process's stdout and stderr into ``path``
    (appended: a retried trial's attempts follow one another), still passing them on."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        log = _Log(path, writers=2)
    except OSError as exc:  # the trial runs anyway; its output still reaches the driver
        print(f"actorrt.tune: cannot write the trial's log {path}: {exc}", file=sys.stderr)
        yield
        return
    tees: list[_Tee] = []
    try:
        for fd in (1, 2):
            tees.append(_Tee(fd, log))
    except OSError as exc:  # out of descriptors: log what could be set up
        print(f"actorrt.tune: the trial's log {path} is incomplete: {exc}", file=sys.stderr)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for tee in tees:
            tee.restore()
        for _ in range(2 - len(tees)):
            log.done()  # a tee that could not be set up will not close the file
        for tee in tees:
            tee.thread.join(_DRAIN_WAIT_S)
