"""``RayTrainReportCallback``: Lightning's metrics and a checkpoint, reported each epoch."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ..._shared._checkpoint import Checkpoint
from ..context import report
from ._pl import pl


class RayTrainReportCallback(pl.callbacks.Callback):
    """Reports metrics and a Lightning checkpoint to Train at the end of every training
    epoch (Ray's ``RayTrainReportCallback`` for Lightning).

    At each ``on_train_epoch_end``, on every rank, it takes ``trainer.callback_metrics``
    (what the module logged with ``self.log``) as numbers, adds ``epoch`` and ``step``
    (Lightning's ``current_epoch`` and ``global_step``), saves the full trainer state with
    ``trainer.save_checkpoint`` and calls ``train.report(metrics, checkpoint=...)``. Each
    kept checkpoint directory holds one file::

        checkpoint_00000N/
            checkpoint.ckpt     the Lightning checkpoint

    which ``pl.Trainer.fit(model, ckpt_path=...)`` resumes from and
    ``LightningModule.load_from_checkpoint`` loads. Ranks that wrote no files (Lightning
    writes on rank 0) report their metrics without a checkpoint. All ranks leave the
    callback together (a barrier), as in Ray.

    Runs inside the training function; if saving or reporting raises, the error ends
    Lightning's ``fit`` and so the training function.
    """

    CHECKPOINT_NAME = "checkpoint.ckpt"

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metrics: dict[str, Any] = {
            name: _number(value) for name, value in trainer.callback_metrics.items()
        }
        metrics["epoch"] = trainer.current_epoch
        metrics["step"] = trainer.global_step
        with tempfile.TemporaryDirectory(prefix="lightning-checkpoint-") as folder:
            trainer.save_checkpoint(os.path.join(folder, self.CHECKPOINT_NAME), weights_only=False)
            wrote = bool(os.listdir(folder))
            report(metrics, checkpoint=Checkpoint.from_directory(folder) if wrote else None)
        trainer.strategy.barrier()


def _number(value: Any) -> Any:
    """A one-element tensor as a Python number; anything else as it is."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "numel", lambda: 0)() == 1:
        return item()
    return value
