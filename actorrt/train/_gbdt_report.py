"""What the gradient-boosting callbacks report: each round's evaluation metrics, and the
model as a checkpoint every ``frequency`` rounds and at the end (rank 0's files only).

``actorrt.train.xgboost.RayTrainReportCallback`` and ``actorrt.train.lightgbm``'s are this
logic around each library's callback hook. They call ``train.report``, so they work in a
trainer's workers (where every rank must report the same rounds: each does) and in a
Tune function trainable (``tune.report``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._shared._checkpoint import Checkpoint
from .context import get_context, report

__all__ = ["BoostingReport", "check_metrics"]

Metrics = str | Sequence[str] | Mapping[str, str] | None


def check_metrics(metrics: Metrics) -> dict[str, str] | None:
    """``metrics`` as {reported name: the library's ``<data>-<metric>`` name}; ``None``:
    report every metric under its own name."""
    if metrics is None:
        return None
    if isinstance(metrics, str):
        return {metrics: metrics}
    if isinstance(metrics, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metrics.items()):
            raise TypeError(f"metrics must map report names to metric names, got {metrics!r}")
        return dict(metrics)
    if isinstance(metrics, Sequence) and all(isinstance(m, str) for m in metrics):
        return {m: m for m in metrics}
    raise TypeError(
        "metrics must be a metric name, a list of names, or a dict of report name to "
        f"metric name (like 'valid-logloss'), got {metrics!r}"
    )


class BoostingReport:
    """Reports each boosting round (see the module docstring).

    Args:
        metrics: which metrics to report (``check_metrics``).
        filename: the model's file in the checkpoint folder.
        frequency: a checkpoint every this many rounds; ``0``: none but the last.
        checkpoint_at_end: a checkpoint after the last round (unless the last round's
            report already had one).
        results_postprocessing_fn: applied to each report's metrics before it is made.
    """

    def __init__(
        self,
        metrics: Metrics = None,
        filename: str = "model",
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
            raise ValueError(f"frequency must be a whole number of rounds >= 0, got {frequency!r}")
        if not isinstance(filename, str) or not filename or os.sep in filename:
            raise ValueError(f"filename must be a file name (no folder), got {filename!r}")
        if results_postprocessing_fn is not None and not callable(results_postprocessing_fn):
            raise TypeError(
                f"results_postprocessing_fn must be callable, got {results_postprocessing_fn!r}"
            )
        self._metrics = check_metrics(metrics)
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._postprocess = results_postprocessing_fn
        self._last: dict[str, Any] = {}
        self._rounds = 0
        self._checkpointed_round = -1

    def _report_dict(self, values: Mapping[str, float]) -> dict[str, Any]:
        if self._metrics is None:
            out = dict(values)
        else:
            missing = sorted(v for v in self._metrics.values() if v not in values)
            if missing:
                raise KeyError(
                    f"metrics {missing} were not evaluated; this round has {sorted(values)} "
                    "(names are '<evaluation set>-<metric>')"
                )
            out = {name: values[key] for name, key in self._metrics.items()}
        return self._postprocess(out) if self._postprocess is not None else out

    def _save(self, model: Any, path: str) -> None:
        raise NotImplementedError  # each library saves its model its own way

    def round_done(self, model: Any, boosting_round: int, values: Mapping[str, float]) -> None:
        """Report round ``boosting_round`` (counted from 1, as the library counts it, so a
        model trained on from an earlier one keeps its numbering) and its ``values``
        (``<data>-<metric>``: last value)."""
        self._rounds = boosting_round
        self._last = self._report_dict(values)
        with_checkpoint = self._frequency > 0 and self._rounds % self._frequency == 0
        self._report(model, self._last, with_checkpoint)
        if with_checkpoint:
            self._checkpointed_round = self._rounds

    def training_done(self, model: Any) -> None:
        """The final checkpoint (``checkpoint_at_end``), unless the last round had one."""
        if self._checkpoint_at_end and self._checkpointed_round != self._rounds:
            self._report(model, self._last, True)
            self._checkpointed_round = self._rounds

    def _report(self, model: Any, metrics: dict[str, Any], with_checkpoint: bool) -> None:
        # Every rank holds the same model: rank 0's file is the checkpoint.
        if not with_checkpoint or get_context().get_world_rank() != 0:
            report(metrics)
            return
        with tempfile.TemporaryDirectory(prefix="actorrt-model-") as folder:
            self._save(model, os.path.join(folder, self._filename))
            report(metrics, checkpoint=Checkpoint.from_directory(folder))

    @staticmethod
    def model_path(checkpoint: Checkpoint, filename: str) -> str:
        """The model file of ``checkpoint``, or a ``FileNotFoundError`` naming what it has."""
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"checkpoint must be a train.Checkpoint, got {checkpoint!r}")
        path = os.path.join(checkpoint.path, filename)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"checkpoint {checkpoint.path} has no model file {filename!r}: it holds "
                f"{sorted(os.listdir(checkpoint.path))}; pass the filename= it was saved with"
            )
        return path
