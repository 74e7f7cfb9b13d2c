"""SIGTERM as an orderly stop with a bounded grace: the one mechanism behind ``actorrt.run``,
``actorrt.init`` and ``Tuner.fit()``.

SIGTERM is how containers, Slurm and Kubernetes stop a program. Python's default action ends
the process at once, so no ``finally`` block, ``on_stop`` hook or experiment save runs. While
an :class:`OrderlySigterm` is installed, the first SIGTERM instead calls its ``on_term`` (which
starts the stop: cancel the main task, raise in the main thread) and starts the grace clock.
A second SIGTERM, or the grace running out, ends the process at once, by the default action,
so its parent sees it ended by SIGTERM (the shell's status 143). An orderly stop ends in
``SystemExit(143)``, the same status.

The handler is installed only on the main thread (Python runs signal handlers there) and only
where the default action is in place or another ``OrderlySigterm`` is (``fit()`` inside a
script that called ``init()``): a handler the program installed itself is never replaced.
An embedded ``Runtime`` (``async with``) installs none; the service owns its signals.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

logger = logging.getLogger("actorrt")

SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM  # the shell's status for "ended by SIGTERM"
DEFAULT_GRACE = 30.0  # seconds an orderly stop after SIGTERM may take


def check_grace(value: object, where: str) -> float | None:
    """``value`` as a grace in seconds (``None``: SIGTERM is left alone), or a clear error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{where}: sigterm_grace must be a number of seconds or None, got {value!r}"
        )
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{where}: sigterm_grace must be a positive finite number of seconds "
            f"(or None to leave SIGTERM alone), got {value!r}"
        )
    return float(value)


class OrderlySigterm:
    """While installed, SIGTERM calls ``on_term`` once and bounds what follows by ``grace``.

    ``on_term`` runs in the main thread, inside the signal handler: it may raise (the
    exception surfaces where the main thread was) or hand work to an event loop with
    ``call_soon_threadsafe``. ``terminated`` says whether a SIGTERM came.
    """

    def __init__(self, on_term: Callable[[], None], grace: float, what: str) -> None:
        self._on_term = on_term
        self._grace = grace
        self._what = what
        self._previous: Any = None
        self._installed = False
        self._timer: threading.Timer | None = None
        self.terminated = False

    def install(self) -> bool:
        """Take over SIGTERM, where that is allowed (see the module); whether it was."""
        if threading.current_thread() is not threading.main_thread():
            return False
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_DFL and not _is_orderly(previous):
            return False
        self._previous = previous
        signal.signal(signal.SIGTERM, self._handle)
        self._installed = True
        return True

    def uninstall(self) -> None:
        """Give SIGTERM back and stop the grace clock (the orderly stop is over). After a
        SIGTERM the default action stays: the program is ending, another one ends it now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._installed:
            return
        self._installed = False
        if not self.terminated and signal.getsignal(signal.SIGTERM) == self._handle:
            signal.signal(signal.SIGTERM, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # A second SIGTERM ends the program at once: the default action from now on.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._arm()
        logger.warning(
            "SIGTERM: %s stops in order (at most %.0f s; a second SIGTERM ends it at once)",
            self._what,
            self._grace,
        )
        self._on_term()

    def _arm(self) -> None:
        """Mark this (and any mechanism it was installed over) terminated, grace running."""
        self.terminated = True
        if self._timer is None:
            self._timer = threading.Timer(self._grace, self._expired)
            self._timer.daemon = True
            self._timer.start()
        outer = getattr(self._previous, "__self__", None)
        if isinstance(outer, OrderlySigterm) and not outer.terminated:
            outer._arm()  # e.g. the script's init(): its own shutdown is bounded too

    def _expired(self) -> None:
        logger.error(
            "SIGTERM: %s did not stop within %.0f s; ending the process now",
            self._what,
            self._grace,
        )
        # The handler set the default action already: this ends the process, by SIGTERM.
        os.kill(os.getpid(), signal.SIGTERM)


def _is_orderly(handler: object) -> bool:
    return isinstance(getattr(handler, "__self__", None), OrderlySigterm)
