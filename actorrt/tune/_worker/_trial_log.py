"""The per-trial log: a trial process's stdout and stderr, copied into the trial's folder.

While a trial runs, file descriptors 1 and 2 of its worker process point at pipes; a
thread per pipe copies what arrives both to where the descriptor pointed before (the pipe
to the driver, which shows it on the driver's console prefixed with the worker's name) and
to ``<trial folder>/output.log`` (created by the trial's first output). Working at the
descriptor level catches everything the process writes: ``print``, logging handlers on
``sys.stderr``, C extensions, and programs the trial runs with ``subprocess``.

One trial runs in a worker process at a time, so the whole process's output while it runs
is that trial's. The pipes and their threads are made once per process and kept for the
next trials it runs (worker processes are reused): a trial only points the descriptors at
them and back. When a trial's attempt ends, the descriptors are put back, then a marker is
written into each pipe; once its thread has copied everything up to the marker the log is
closed, so the log is complete when the controller hears that the attempt ended. What a
child process that outlives its trial writes later still reaches the driver's console (and
the log of the trial running then, if any).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import IO

__all__ = ["LOG_FILE", "trial_output"]

LOG_FILE = "output.log"
_DRAIN_WAIT_S = 5.0  # how long to wait for a pipe's thread to reach the end marker
_MAX_PARTIAL = 1 << 16  # a line this long goes to the log before its end comes
_READ_SIZE = 1 << 16


class _Log:
    """The trial's log file, written by both pipes' threads; created by the first output
    (a trial that writes nothing leaves no file: a file creation less per trial, which
    some disks make the costliest thing about a short trial)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file: IO[bytes] | None = None
        self.closed = False
        self.lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.file is None and not self.closed:
                try:
                    self.file = open(self.path, "ab")  # noqa: SIM115 (closed by close())
                except OSError as exc:  # the output still reaches the driver's console
                    self.closed = True
                    _say(f"actorrt.tune: cannot write the trial's log {self.path}: {exc}\n")
            if self.file is not None:
                self.file.write(data)
                self.file.flush()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self.file is not None:
                self.file.close()
                self.file = None


class _Tee:
    """One descriptor's pipe and the thread copying it: made once, used by every trial."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.saved = os.dup(fd)  # where the descriptor points between trials
        try:
            self.read, self.write = os.pipe()
        except OSError:
            os.close(self.saved)
            raise
        # Atomic in a pipe (shorter than PIPE_BUF), so no other writer's bytes cut into it.
        self.marker = b"\x00actorrt-trial-log-end-" + os.urandom(8).hex().encode() + b"\x00"
        self.log: _Log | None = None
        self.partial = b""  # the start of a line whose end has not come yet
        self.reached = threading.Event()
        thread = threading.Thread(target=self._copy, name=f"actorrt-trial-log-{fd}", daemon=True)
        # The process's, not a trial's: a worker that holds it may host the next actor.
        setattr(thread, "actorrt_process_thread", True)  # noqa: B010  (the core's marker)
        thread.start()

    def start(self, log: _Log) -> None:
        """Send the descriptor into the pipe, copied to ``log`` too."""
        self.log = log
        self.reached.clear()
        os.dup2(self.write, self.fd)

    def end(self) -> None:
        """Put the descriptor back and mark the end of the trial's output in the pipe."""
        os.dup2(self.saved, self.fd)
        os.write(self.write, self.marker)

    def wait_end(self) -> None:
        self.reached.wait(_DRAIN_WAIT_S)
        self.log = None

    def _copy(self) -> None:
        marker = self.marker
        held = b""  # the end of a read that may be the start of a marker
        while True:
            try:
                data = os.read(self.read, _READ_SIZE)
            except OSError:
                return
            if not data:
                return
            data = held + data
            held = b""
            while (at := data.find(marker)) >= 0:
                self._pass_on(data[:at])
                self._end_of_trial()
                data = data[at + len(marker) :]
            for size in range(min(len(marker) - 1, len(data)), 0, -1):
                if marker.startswith(data[-size:]):
                    data, held = data[:-size], data[-size:]
                    break
            self._pass_on(data)

    def _pass_on(self, data: bytes) -> None:
        if not data:
            return
        log = self.log
        if log is not None:
            # The log gets whole lines, so stdout's and stderr's lines do not cut into each
            # other there (print writes its pieces one by one, unbuffered in a worker).
            lines, _, self.partial = (self.partial + data).rpartition(b"\n")
            if lines:
                log.write(lines + b"\n")
            if len(self.partial) >= _MAX_PARTIAL:
                log.write(self.partial)
                self.partial = b""
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.saved, view)
            except OSError:  # the driver's end is gone: keep the log going
                break
            view = view[written:]

    def _end_of_trial(self) -> None:
        log, partial, self.partial = self.log, self.partial, b""
        if log is not None and partial:
            log.write(partial)  # a last line with no newline
        self.reached.set()


_tees: list[_Tee] | None = None
_tees_lock = threading.Lock()


def _process_tees() -> list[_Tee]:
    """This process's tees, made on first use (one per descriptor that could be set up)."""
    global _tees
    with _tees_lock:
        if _tees is None:
            tees = []
            try:
                for fd in (1, 2):
                    tees.append(_Tee(fd))
            except OSError as exc:  # out of descriptors: log what could be set up
                print(f"actorrt.tune: trial logs will be incomplete: {exc}", file=sys.stderr)
            _tees = tees
        return _tees


@contextlib.contextmanager
def trial_output(path: str) -> Iterator[None]:
    """While the block runs, copy this process's stdout and stderr into ``path``
    (appended: a retried trial's attempts follow one another), still passing them on."""
    _flush_streams()
    log = _Log(path)
    tees = _process_tees()
    for tee in tees:
        tee.start(log)
    try:
        yield
    finally:
        _flush_streams()
        for tee in tees:
            tee.end()
        for tee in tees:
            tee.wait_end()
        log.close()


def _say(text: str) -> None:
    """Write ``text`` where stderr pointed before the trial (from a tee's thread, whose
    own output would go back into the pipe it copies)."""
    tees = _tees or []
    fd = next((tee.saved for tee in tees if tee.fd == 2), 2)
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "replace"))


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
