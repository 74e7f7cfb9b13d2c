"""``RayTrainReportCallback`` for XGBoost: each boosting round's metrics to
``train.report``, the booster as a checkpoint (Ray's ``ray.train.xgboost`` callback)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..._shared._checkpoint import Checkpoint
from .._extras import require
from .._gbdt_report import BoostingReport, Metrics

xgboost: Any = require("xgboost", "xgboost", "actorrt.train.xgboost")
_TrainingCallback: Any = xgboost.callback.TrainingCallback  # what xgboost.train accepts

__all__ = ["RayTrainReportCallback"]

MODEL_FILENAME = "model.ubj"


def _last_values(evals_log: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """``<data>-<metric>``: the round's value (the mean, with XGBoost's ``cv`` std)."""
    out: dict[str, float] = {}
    for data, metrics in evals_log.items():
        for metric, history in metrics.items():
            value = history[-1]
            out[f"{data}-{metric}"] = float(value[0] if isinstance(value, tuple) else value)
    return out


class _Report(BoostingReport):
    def _save(self, model: Any, path: str) -> None:
        model.save_model(path)


class RayTrainReportCallback(_TrainingCallback):  # type: ignore[misc]
    """Reports XGBoost's evaluation metrics after every boosting round, and the booster
    as a checkpoint (Ray's ``ray.train.xgboost.RayTrainReportCallback``).

    Pass it in ``xgboost.train(..., callbacks=[RayTrainReportCallback()])`` in the
    training function of an ``XGBoostTrainer`` (every rank reports each round, rank 0's
    model file is the checkpoint), or of a Tune trial. Metrics are named
    ``<evaluation set>-<metric>`` (``"valid-logloss"``), as in ``evals=[(d, "valid")]``.

    Args:
        metrics: which metrics to report: a name, a list, or a dict of the reported name
            to XGBoost's; ``None``: all of them.
        filename: the model's file in the checkpoint.
        frequency: a checkpoint every this many rounds; ``0``: only at the end.
        checkpoint_at_end: a checkpoint after the last round.
        results_postprocessing_fn: applied to each report's metrics dict first.
    """

    def __init__(
        self,
        metrics: Metrics = None,
        filename: str = MODEL_FILENAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._report = _Report(metrics, filename, frequency, checkpoint_at_end,
                               results_postprocessing_fn)

    @classmethod
    def get_model(cls, checkpoint: Checkpoint, filename: str = MODEL_FILENAME) -> Any:
        """The ``xgboost.Booster`` saved in ``checkpoint``."""
        booster = xgboost.Booster()
        booster.load_model(BoostingReport.model_path(checkpoint, filename))
        return booster

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        self._report.round_done(model, epoch + 1, _last_values(evals_log))
        return False  # never stops training: a Tune scheduler stops the trial instead

    def after_training(self, model: Any) -> Any:
        self._report.training_done(model)
        return model
