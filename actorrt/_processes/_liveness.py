"""Liveness of worker processes: is each one stopped, or not answering?

A worker can be alive and still do nothing: stopped by a signal (SIGSTOP, a debugger, a
terminal's Ctrl-Z), or with a thread holding the GIL in one long C call so that its event
loop never runs. Asks to such a worker wait, and a graceful stop never completes. So the
runtime that owns workers checks each one every :data:`CHECK_INTERVAL` seconds:

- its state in ``/proc/<pid>/stat``: ``T`` (stopped by a signal) at once; ``t`` (stopped by
  a tracer) only once a ping sent while it is so, and it has stayed so at every look since,
  has gone unanswered for :data:`TRACED_STOP_AFTER` seconds. A tracer such as ``strace``
  or a sampling profiler stops a process for a moment at each system call or sample, so a
  process seen ``t`` is most often running under one; a debugger holding it at a
  breakpoint answers nothing;
- a ping on its connection, which its event loop answers; one not answered within
  :data:`UNRESPONSIVE_AFTER` seconds makes the worker unresponsive. A worker is pinged
  again a quarter of that after its last answer, not every round: a thousand workers on
  other nodes cost a thousand TLS writes per ping round.

The checks go in slices of :data:`CHECK_SLICE` workers, the loop serving everything else
between two slices, so that many workers never hold the loop up for long.

A worker found frozen is reported once per episode (a warning naming the actor and the pid;
an info line when it answers again), shown by ``actorrt status`` (state ``unresponsive``),
and its actor is told
(:meth:`~actorrt._processes._process_actor.ProcessActor.frozen`): a stop waiting on a
stopped worker escalates to a kill. The checks run only while the runtime has workers.

This module does not know the pool: :class:`LivenessWatch` is given a callable that lists
the live workers, each seen through the :class:`Watched` protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._wire._connection import Connection
from .._wire._messages import Ping

logger = logging.getLogger("actorrt")

CHECK_INTERVAL = 1.0  # seconds between two checks of every worker
UNRESPONSIVE_AFTER = 10.0  # seconds a ping may go unanswered before the worker is frozen
CHECK_SLICE = 64  # workers checked before the loop serves others again
TRACED_STOP_AFTER = 2.0  # seconds a traced worker (``t``) may leave a ping unanswered
_HELD_BY_TRACER = "stopped by a debugger (traced, and its pings go unanswered)"


def process_state(pid: int) -> str:
    """The one-letter state of process ``pid`` (``R``, ``S``, ``T``, ...); ``?`` if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return "?"
    return stat[stat.rindex(b")") + 2 :][:1].decode() or "?"


class Liveness:
    """One worker's liveness, as its owner last saw it."""

    __slots__ = ("answered", "frozen_since", "ping_sent", "stopped", "traced_since", "why")

    def __init__(self) -> None:
        self.why: str | None = None  # None: live; else what is wrong ("stopped by a signal")
        self.stopped = False  # stopped by a signal (not merely slow to answer)
        self.frozen_since: float | None = None
        self.ping_sent: float | None = None  # monotonic time of the unanswered ping
        self.answered = 0.0  # monotonic time of the last answered ping
        self.traced_since: float | None = None  # first of the looks in a row that saw ``t``

    def describe(self) -> str | None:
        if self.why is None or self.frozen_since is None:
            return None
        return f"{self.why} for {time.monotonic() - self.frozen_since:.0f} s"


class Watched(Protocol):
    """A worker process, as the liveness checks see it."""

    @property
    def pid(self) -> int: ...

    @property
    def alive(self) -> bool: ...

    @property
    def conn(self) -> Connection | None: ...

    @property
    def label(self) -> str: ...

    @property
    def liveness(self) -> Liveness: ...

    def process_state(self) -> str:
        """Its state in ``/proc`` (``T``: stopped), or ``?`` where it cannot be read."""
        ...

    @property
    def hosted(self) -> Any:
        """The process actor it runs now (told ``frozen()``), or ``None``."""
        ...


class LivenessWatch:
    """Checks every worker that ``live_workers()`` lists, once per :data:`CHECK_INTERVAL`."""

    def __init__(self, live_workers: Callable[[], Sequence[Watched]]) -> None:
        self.live_workers = live_workers
        self._task: asyncio.Task[None] | None = None

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="actorrt:liveness"
            )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while workers := self.live_workers():
            began = time.monotonic()
            for checked, worker in enumerate(workers, 1):
                self.check(worker)
                if checked % CHECK_SLICE == 0:
                    await asyncio.sleep(0)
            await asyncio.sleep(max(CHECK_INTERVAL - (time.monotonic() - began), 0.0))

    def check(self, worker: Watched) -> None:
        conn = worker.conn
        if conn is None or conn.is_closing() or not worker.alive:
            return
        live = worker.liveness
        now = time.monotonic()
        state = worker.process_state()
        unanswered = None if live.ping_sent is None else now - live.ping_sent
        if state != "t":
            live.traced_since = None
        elif live.traced_since is None:
            live.traced_since = now
        if state == "T":
            why: str | None = "stopped by a signal (SIGSTOP, or Ctrl-Z in its terminal)"
        elif (
            live.traced_since is not None
            and live.ping_sent is not None
            and live.ping_sent >= live.traced_since
            and now - live.ping_sent >= TRACED_STOP_AFTER
        ):
            why = _HELD_BY_TRACER
        elif unanswered is not None and unanswered >= UNRESPONSIVE_AFTER:
            why = "not answering (its event loop is blocked, e.g. by a thread holding the GIL)"
        else:
            why = None
        if why is None and live.why is _HELD_BY_TRACER:
            why = live.why  # held until it answers (``_answered``), as a stop by a signal is
        if live.ping_sent is None and (
            state == "t" or now - live.answered >= UNRESPONSIVE_AFTER / 4
        ):
            try:
                pong = conn.request(Ping(), urgent=True)  # never in line behind calls
            except Exception:  # the connection is going: its end is reported elsewhere
                return
            live.ping_sent = now
            pong.add_done_callback(functools.partial(self._answered, worker=worker))
        if why != live.why:
            self._changed(worker, why, now)

    def _answered(self, pong: asyncio.Future[object], worker: Watched) -> None:
        if pong.cancelled() or pong.exception() is not None:
            return  # the connection ended: the process's exit is reported elsewhere
        worker.liveness.ping_sent = None
        worker.liveness.answered = time.monotonic()
        if worker.liveness.why is not None and worker.process_state() != "T":
            self._changed(worker, None, time.monotonic())

    def _changed(self, worker: Watched, why: str | None, now: float) -> None:
        live = worker.liveness
        was = live.describe()
        live.why = why
        live.stopped = why is not None and why.startswith("stopped")
        if why is None:
            live.frozen_since = None
            logger.info("%s (pid %d) is responsive again after being %s", worker.label,
                        worker.pid, was)
            return
        if live.frozen_since is None:
            live.frozen_since = now
        logger.warning(
            "%s (pid %d) is %s: asks to it wait until it runs again or is killed "
            "(ref.kill(), or ref.stop(grace=...))",
            worker.label, worker.pid, why,
        )
        if worker.hosted is not None:
            worker.hosted.frozen()
