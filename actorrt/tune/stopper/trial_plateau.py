"""``TrialPlateauStopper``: stop a trial whose metric has stopped changing."""

from __future__ import annotations

import collections
import statistics
from typing import Any

from .stopper import Stopper, metric_value, positive_int

__all__ = ["TrialPlateauStopper"]


class TrialPlateauStopper(Stopper):
    """Stop a trial once ``metric`` has plateaued: the standard deviation of its last
    ``num_results`` values is at most ``std`` (Ray's ``TrialPlateauStopper``).

    Args:
        metric: the metric to watch.
        std: the largest standard deviation that counts as a plateau.
        num_results: how many of the latest values to look at.
        grace_period: never stop a trial before this many results.
        metric_threshold: with ``mode``, stop only once the metric is better than this
            (below it for ``"min"``, above it for ``"max"``).
        mode: ``"min"`` or ``"max"``; needed with ``metric_threshold``.
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.01,
        num_results: int = 4,
        grace_period: int = 4,
        metric_threshold: float | None = None,
        mode: str | None = None,
    ) -> None:
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a metric name, got {metric!r}")
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")
        if metric_threshold is not None and mode is None:
            raise ValueError(
                "TrialPlateauStopper: metric_threshold needs mode='min' or mode='max'"
            )
        self._metric, self._std, self._mode = metric, float(std), mode
        self._num_results = positive_int("num_results", num_results)
        self._grace = positive_int("grace_period", grace_period, 0)
        self._threshold = metric_threshold
        self._window: dict[str, collections.deque[float]] = collections.defaultdict(
            lambda: collections.deque(maxlen=self._num_results)
        )
        self._count: collections.Counter[str] = collections.Counter()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = metric_value("TrialPlateauStopper", self._metric, result)
        self._count[trial_id] += 1
        window = self._window[trial_id]
        window.append(value)
        if self._count[trial_id] < self._grace or len(window) < self._num_results:
            return False
        if self._threshold is not None:
            if self._mode == "min" and value > self._threshold:
                return False
            if self._mode == "max" and value < self._threshold:
                return False
        return statistics.pstdev(window) < self._std  # strictly below, as in Ray
