"""``TimeoutStopper``: stop the whole experiment after a time."""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

from .stopper import Stopper

__all__ = ["TimeoutStopper"]

logger = logging.getLogger("actorrt.tune")


class TimeoutStopper(Stopper):
    """Stop the whole experiment after ``timeout`` (seconds, or a ``datetime.timedelta``),
    as Ray's ``TimeoutStopper``: the time counts from the first check (the first result),
    and across a restore only the time the experiment ran. Running trials are stopped
    and count as finished."""

    def __init__(self, timeout: float | datetime.timedelta) -> None:
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(
                f"timeout must be a positive number of seconds or a timedelta, got {timeout!r}"
            )
        self._timeout = float(timeout)
        self._budget = self._timeout
        self._last_check: float | None = None

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        now = time.time()
        if self._last_check is not None:
            self._budget -= now - self._last_check
        self._last_check = now
        if self._budget <= 0:
            logger.info("tune: TimeoutStopper: %.4g s reached, stopping", self._timeout)
            return True
        return False

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["_last_check"] = None  # a restored experiment: the time between runs is free
        self.__dict__.update(state)
