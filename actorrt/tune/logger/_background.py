"""A logger's own writer thread: hooks queue calls, the thread makes them in order.

Tracking clients talk to servers (or write files) and may take long; a Tune callback runs
on the controller's event loop, where a slow hook delays every trial's report. So the
tracking callbacks (``tune.logger.aim``'s, and ``air.integrations``' MLflow, W&B and Comet
ones) only queue each call; one daemon thread per callback makes them, in the
order queued. An exception on the thread is raised from the next hook (so Tune reports
it like any callback's failure) or from :meth:`Background.close`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Background"]

logger = logging.getLogger("actorrt.tune")


class Background:
    """One writer thread, started with the first call queued."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"{self._name} failed: {error}") from error

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)`` (raising first what an earlier call raised)."""
        self._raise_pending()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name=f"actorrt-{self._name}", daemon=True
            )
            self._thread.start()
        self._queue.put((fn, args))

    def close(self, timeout_s: float) -> None:
        """Make every queued call, stop the thread (waiting ``timeout_s`` at most), and
        raise what a call raised."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning(
                    "tune: %s did not finish its queued calls within %.0f s; the last "
                    "results may be missing", self._name, timeout_s,
                )
        self._raise_pending()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception as exc:
                if self._error is None:
                    self._error = exc
                else:
                    logger.warning("tune: %s: %s", self._name, exc)
