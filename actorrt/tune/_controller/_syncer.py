"""Syncing a file to disk off the caller's thread.

The journal's line for a trial's end must reach the disk (``fsync``), but the controller
need not wait for that: a helper thread does it, and requests that arrive while one sync
runs, or within ``SYNC_EVERY_S`` of the last one, are served together by the next, so a sweep
whose trials end every few milliseconds costs a few syncs a second (on ext4 each one commits
the file system's journal: the costliest call of a trial's end).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import time

__all__ = ["SYNC_EVERY_S", "Syncer"]

# At most one sync per this long: a machine crash may lose the trial ends of the last
# SYNC_EVERY_S (docs/tune.md, "What a crash may lose").
SYNC_EVERY_S = 0.2


class Syncer:
    """``fsync``-s one file on a helper thread, at most once per ``SYNC_EVERY_S`` and never
    twice at once: requests made meanwhile are served together by the next."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._wanted = False
        self._running = False
        self._closing = threading.Event()
        self._last = -SYNC_EVERY_S
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
            # Gather the requests of the next moment into this sync (cut short by close,
            # which syncs itself).
            self._closing.wait(max(self._last + SYNC_EVERY_S - time.monotonic(), 0.0))
            with self._lock:
                if not self._wanted:
                    self._running = False
                    return
                self._wanted = False
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            self._last = time.monotonic()

    def close(self) -> None:
        """Wait for a running ``fsync`` to end."""
        self._closing.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
