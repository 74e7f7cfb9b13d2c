"""LightGBM callbacks that report to Tune (Ray's ``ray.tune.integration.lightgbm``).

``TuneReportCheckpointCallback`` is ``actorrt.train.lightgbm.RayTrainReportCallback``: in
a Tune function trainable ``train.report`` is ``tune.report``, so each boosting round
becomes a trial result and the booster a checkpoint. ``TuneReportCallback`` reports the
metrics only. Needs ``pip install 'actorrt[lightgbm]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...train.lightgbm._lightgbm_utils import MODEL_FILENAME, RayTrainReportCallback

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]


class TuneReportCheckpointCallback(RayTrainReportCallback):
    """Reports each round's metrics to Tune and the booster as a checkpoint (Ray's
    ``TuneReportCheckpointCallback``; arguments as ``RayTrainReportCallback``'s)."""


class TuneReportCallback(RayTrainReportCallback):
    """Reports each round's metrics to Tune, without checkpoints (Ray's older
    ``TuneReportCallback``)."""

    def __init__(
        self,
        metrics: Any = None,
        results_postprocessing_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(metrics, MODEL_FILENAME, frequency=0, checkpoint_at_end=False,
                         results_postprocessing_fn=results_postprocessing_fn)
