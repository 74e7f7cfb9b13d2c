"""``RayTrainReportCallback`` for LightGBM: each boosting round's metrics to
``train.report``, the booster as a checkpoint (Ray's ``ray.train.lightgbm`` callback)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._shared._checkpoint import Checkpoint
from .._extras import require
from .._gbdt_report import BoostingReport, Metrics

lightgbm: Any = require("lightgbm", "lightgbm", "actorrt.train.lightgbm")

__all__ = ["RayTrainReportCallback"]

MODEL_FILENAME = "model.txt"


def _round_values(results: Any) -> dict[str, float]:
    """``<data>-<metric>`` of each evaluation; ``lightgbm.cv``'s (which carry a standard
    deviation) as ``<data>-<metric>-mean`` and ``-stdv``, as Ray names them."""
    out: dict[str, float] = {}
    for data, metric, value, *rest in results:
        if len(rest) >= 2:  # (..., is_higher_better, stdv): a cross-validation fold mean
            out[f"{data}-{metric}-mean"] = float(value)
            out[f"{data}-{metric}-stdv"] = float(rest[1])
        else:
            out[f"{data}-{metric}"] = float(value)
    return out


class _Report(BoostingReport):
    def _save(self, model: Any, path: str) -> None:
        model.save_model(path)


class RayTrainReportCallback:
    """Reports LightGBM's evaluation metrics after every boosting round, and the booster
    as a checkpoint (Ray's ``ray.train.lightgbm.RayTrainReportCallback``).

    Pass it in ``lightgbm.train(..., callbacks=[RayTrainReportCallback()])`` in the
    training function of a ``LightGBMTrainer`` (every rank reports each round; rank 0's
    model file is the checkpoint), or of a Tune trial. Metrics are named
    ``<valid set name>-<metric>`` (``"valid-binary_logloss"``).

    Args:
        metrics: which metrics to report: a name, a list, or a dict of the reported name
            to LightGBM's; ``None``: all of them.
        filename: the model's file in the checkpoint.
        frequency: a checkpoint every this many rounds; ``0``: only at the end.
        checkpoint_at_end: a checkpoint after the last round.
        results_postprocessing_fn: applied to each report's metrics dict first.
    """

    order = 20  # after LightGBM's own callbacks (early stopping is 30: this runs first)
    before_iteration = False

    def __init__(
        self,
        metrics: Metrics = None,
        filename: str = MODEL_FILENAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._report = _Report(metrics, filename, frequency, checkpoint_at_end,
                               results_postprocessing_fn)

    @classmethod
    def get_model(cls, checkpoint: Checkpoint, filename: str = MODEL_FILENAME) -> Any:
        """The ``lightgbm.Booster`` saved in ``checkpoint``."""
        return lightgbm.Booster(model_file=BoostingReport.model_path(checkpoint, filename))

    def __call__(self, env: Any) -> None:
        self._report.round_done(env.model, env.iteration + 1,
                                _round_values(env.evaluation_result_list or ()))
        if env.iteration == env.end_iteration - 1:
            self._report.training_done(env.model)
