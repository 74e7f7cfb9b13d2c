"""The threads that run worker-process actors' synchronous code, off the event loop.

A worker-process actor's constructor, hooks and sync methods may block for minutes (a
training loop), so they run on a thread of the actor's own while the loop keeps the
process's messaging going. One message at a time (``max_concurrency=1``) needs one thread,
fed through a queue and answering with ``call_soon_threadsafe``: cheaper per hand-over than
an executor's future chain, which matters when every call of a pipelined stream crosses it.
Threads are kept by the worker and reused by its next actor.

A worker is reused only when its actor left no thread behind: :func:`actor_threads` lists
the threads alive that are not the process's own (its main thread, the runtime's kept
threads, and those a library of actorrt keeps for the whole process, which carry the
attribute :data:`PROCESS_THREAD`, set by :func:`keep_for_process`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

# A thread with this attribute set true belongs to the process, not to the actor running
# now (the name is spelled out where a library above the core marks its threads).
PROCESS_THREAD = "actorrt_process_thread"


def keep_for_process(thread: threading.Thread, kept: bool = True) -> threading.Thread:
    """Mark ``thread`` as the process's own (or, ``kept=False``, as an actor's again)."""
    setattr(thread, PROCESS_THREAD, kept)
    return thread


def actor_threads() -> list[threading.Thread]:
    """The threads alive now that are not the process's own (see the module docstring)."""
    main = threading.main_thread()
    return [
        t for t in threading.enumerate()
        if t is not main and t.is_alive() and not getattr(t, PROCESS_THREAD, False)
    ]


_Item = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class ActorThread:
    """One thread running one actor's sync code, a call at a time."""

    def __init__(self, name: str) -> None:
        self._queue: SimpleQueue[_Item | None] = SimpleQueue()
        self.busy = False
        self._thread = keep_for_process(
            threading.Thread(target=self._serve, name=name, daemon=True)
        )
        self._thread.start()

    def run(self, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``func(*args)`` on the thread, in the caller's context; await the result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put((loop, future, contextvars.copy_context().run, (func, *args)))
        return future

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            loop, future, func, args = item
            self.busy = True
            try:
                value, ok = func(*args), True
            except BaseException as exc:  # everything goes back to the awaiting loop
                value, ok = exc, False
            self.busy = False
            try:
                loop.call_soon_threadsafe(_settle, future, ok, value)
            except RuntimeError:  # the loop has closed: nobody is waiting any more
                pass

    def close(self) -> None:
        """End the thread once its current call returns; until then it is an actor's."""
        keep_for_process(self._thread, False)
        self._queue.put(None)

    def join(self, within: float) -> None:
        """Wait up to ``within`` seconds for a closed thread to end."""
        self._thread.join(within)


class ThreadPoolRunner:
    """``max_concurrency`` threads for an actor that runs several messages at once."""

    def __init__(self, threads: int, name: str) -> None:
        self._threads: list[threading.Thread] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix=name, initializer=self._started
        )
        self.busy = False

    def _started(self) -> None:
        self._threads.append(threading.current_thread())

    def run(self, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._pool, contextvars.copy_context().run, func, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def join(self, within: float) -> None:
        """Wait up to ``within`` seconds in all for the closed pool's threads to end."""
        deadline = time.monotonic() + within
        for thread in list(self._threads):
            thread.join(max(deadline - time.monotonic(), 0.0))
