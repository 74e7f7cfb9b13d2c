"""Ray's ``ray.tune.integration.ray_train``: ``TuneReportCallback``, for a Train run
inside a Tune trial.

In Ray Train V2 a trainer's ``fit()`` called in a Tune function trainable reports to the
trial only through this callback: rank 0's metrics, with the stored checkpoint's path
under ``"checkpoint_path"``. Here a trainer inside a trial reports to it by itself, with
its checkpoint (so that the trial can be paused and restored from it); given, this
callback adds ``"checkpoint_path"`` to what the trial gets, as Ray's does.
"""

from __future__ import annotations

from typing import Any

from ...train import UserCallback

__all__ = ["CHECKPOINT_PATH_KEY", "TuneReportCallback"]

CHECKPOINT_PATH_KEY = "checkpoint_path"


class TuneReportCallback(UserCallback):
    """Passes rank 0's metrics to the enclosing Tune trial with ``checkpoint_path`` (Ray's
    ``TuneReportCallback``); ``RunConfig(callbacks=[TuneReportCallback()])``."""

    def metrics_for_trial(self, metrics: dict[str, Any], checkpoint: str | None) -> dict[str, Any]:
        if checkpoint is None:
            return metrics
        return {**metrics, CHECKPOINT_PATH_KEY: checkpoint}
