"""``ExperimentPlateauStopper``: stop the experiment once its best trials have converged."""

from __future__ import annotations

import math
import statistics
from typing import Any

from .stopper import Stopper, metric_value, positive_int

__all__ = ["ExperimentPlateauStopper"]


class ExperimentPlateauStopper(Stopper):
    """Stop the whole experiment once the best ``top`` values of ``metric`` over all
    trials have plateaued (standard deviation at most ``std``) for ``patience`` more
    results (Ray's ``ExperimentPlateauStopper``)."""

    def __init__(
        self, metric: str, std: float = 0.001, top: int = 10, mode: str = "min", patience: int = 0
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a metric name, got {metric!r}")
        if not (isinstance(std, int | float) and math.isfinite(std) and std > 0):
            raise ValueError(f"std must be a positive number, got {std!r}")
        self._metric, self._std, self._mode = metric, float(std), mode
        self._top = positive_int("top", top, 2)
        self._patience = positive_int("patience", patience, 0)
        self._values: list[float] = []
        self._iterations = 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = metric_value("ExperimentPlateauStopper", self._metric, result)
        self._values.append(value)
        self._values.sort(reverse=self._mode == "max")
        del self._values[self._top :]
        if self.has_plateaued():
            self._iterations += 1
        else:
            self._iterations = 0
        return self.stop_all()

    def has_plateaued(self) -> bool:
        """Whether the best ``top`` values are as close together as ``std`` asks."""
        return len(self._values) == self._top and statistics.pstdev(self._values) <= self._std

    def stop_all(self) -> bool:
        return self.has_plateaued() and self._iterations >= self._patience
