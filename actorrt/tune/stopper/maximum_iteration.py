"""``MaximumIterationStopper``: stop each trial after so many results."""

from __future__ import annotations

import collections
from typing import Any

from .stopper import Stopper, positive_int

__all__ = ["MaximumIterationStopper"]


class MaximumIterationStopper(Stopper):
    """Stop each trial after ``max_iter`` results (Ray's ``MaximumIterationStopper``)."""

    def __init__(self, max_iter: int) -> None:
        self._max_iter = positive_int("max_iter", max_iter)
        self._iter: collections.Counter[str] = collections.Counter()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._iter[trial_id] += 1
        return self._iter[trial_id] >= self._max_iter
