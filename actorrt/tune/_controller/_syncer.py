"""Syncing a file to disk off the caller's thread.

The journal's line for a trial's end must reach the disk (``fsync``), but the controller
need not wait for that: a helper thread does it, and requests that arrive while one sync
runs are served together by the next, so a burst of trial ends costs one or two syncs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading

__all__ = ["Syncer"]


class Syncer:
    """``fsync``-s one file on a helper thread, as often as asked but never twice at once:
    requests made while one runs are served together by the next."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._wanted = False
        self._running = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def request(self) -> None:
        with self._lock:
            self._wanted = True
            if self._running:
                return  # the running one syncs again before it ends
            self._running = True
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="actorrt-tune-journal-sync"
            )
        self._pool.submit(self._run)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._wanted:
                    self._running = False
                    return
                self._wanted = False
            with contextlib.suppress(OSError):
                os.fsync(self._fd)

    def close(self) -> None:
        """Wait for a running ``fsync`` to end."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
