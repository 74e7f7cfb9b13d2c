"""Checks on each reported result, made where Ray Tune makes them.

- **Strict metric checking.** Every result must hold the metric that ``TuneConfig``, the
  scheduler or the search algorithm was given: a result without it is a ``ValueError`` that
  ends ``fit()`` (Ray's behaviour, at the same moment: the first result without it). Set
  ``TUNE_DISABLE_STRICT_METRIC_CHECKING=1`` to turn the check off, as in Ray.
- **Numbers.** A scheduler or search algorithm that optimises a metric computes with it: a
  value that is not a number is a ``TypeError`` that ends ``fit()`` (in Ray, the scheduler's
  arithmetic raises). A NaN is kept, as in Ray (schedulers skip it, ``get_best_result``
  ignores it), with one warning per metric, since a NaN that no one notices usually means a
  diverged run.

``_metric`` (the name a returned number is recorded under) is never required, as in Ray.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from ._storage import flatten

__all__ = ["STRICT_METRIC_ENV", "ResultChecker"]

logger = logging.getLogger("actorrt.tune")

STRICT_METRIC_ENV = "TUNE_DISABLE_STRICT_METRIC_CHECKING"
DEFAULT_METRIC = "_metric"


class ResultChecker:
    """The metrics an experiment requires, and who requires each.

    Args:
        tune_metric: ``TuneConfig(metric)``.
        scheduler: the experiment's scheduler; ``computes`` tells whether it computes with
            its metric (FIFO only passes it along).
        searcher: the experiment's search algorithm (a limiter's inner one is looked at).
        searcher_computes: whether the searcher computes with its metric.
    """

    def __init__(
        self,
        tune_metric: str | None,
        scheduler: Any,
        scheduler_computes: bool,
        searcher: Any,
        searcher_computes: bool,
    ) -> None:
        self.required: list[tuple[str, str]] = []  # (metric, who)
        self.numeric: list[tuple[str, str]] = []
        given = [
            (tune_metric, "TuneConfig(metric=...)", False),
            (getattr(scheduler, "metric", None), type(scheduler).__name__, scheduler_computes),
            (getattr(searcher, "metric", None), type(searcher).__name__, searcher_computes),
        ]
        for metric, who, computes in given:
            for name in [metric] if isinstance(metric, str) else list(metric or []):
                if name == DEFAULT_METRIC:
                    continue
                self.required.append((name, who))
                if computes:
                    self.numeric.append((name, who))
        self._warned_nan: set[str] = set()

    def check(self, trial_name: str, result: Mapping[str, Any]) -> None:
        """Check one result of ``trial_name``.

        Raises:
            ValueError: a required metric is missing (unless the check is turned off).
            TypeError: a metric that a scheduler or searcher computes with is not a number.
        """
        if os.environ.get(STRICT_METRIC_ENV, "0").strip() != "1":
            for metric, who in self.required:
                if metric not in result:
                    reported = sorted(k for k in result if k != "config")
                    raise ValueError(
                        f"trial {trial_name} reported a result without the metric "
                        f"{metric!r} that {who} expects; it reported {reported}. Report "
                        f"the metric in every tune.report() call (or return it), or set "
                        f"{STRICT_METRIC_ENV}=1 to turn this check off"
                    )
        for metric, who in self.numeric:
            if metric not in result:
                continue
            value = result[metric]
            if not isinstance(value, numbers.Real):
                raise TypeError(
                    f"trial {trial_name} reported {metric}={value!r} "
                    f"({type(value).__name__}); {who} optimises {metric!r} and needs a "
                    "number: report a float or an int"
                )
            if math.isnan(value) and metric not in self._warned_nan:
                self._warned_nan.add(metric)
                logger.warning(
                    "tune: trial %s reported %s=nan; %s skips NaN values and "
                    "get_best_result ignores them (shown once per metric)",
                    trial_name, metric, who,
                )


def flat_view(result: Mapping[str, Any]) -> Any:
    """``result`` with its nested metrics also under ``a/b`` names, as Ray's schedulers,
    searchers, stoppers and metric checks see a result (``metric="b/z"`` reads
    ``{"b": {"z": ...}}``); the result itself when nothing but its config is nested."""
    nested = {k: v for k, v in result.items() if isinstance(v, Mapping) and k != "config"}
    if not nested:
        return result
    return {**result, **flatten(nested)}
