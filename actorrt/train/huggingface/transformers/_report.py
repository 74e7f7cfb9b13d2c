"""``RayTrainReportCallback``: each checkpoint ``transformers.Trainer`` saves, reported."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, cast

import torch

from ...._shared._checkpoint import Checkpoint
from ...context import report
from ._hf import transformers

# The newest ``checkpoint-<step>`` folder under an output folder, or None (untyped upstream).
_last_checkpoint = cast(
    Callable[[str], "str | None"], transformers.trainer_utils.get_last_checkpoint
)


class RayTrainReportCallback(transformers.TrainerCallback):
    """After each checkpoint save, reports the logged metrics and that checkpoint to
    Train (Ray's ``RayTrainReportCallback`` for Transformers).

    At ``on_save``, on every rank, the metrics are all the dicts in
    ``state.log_history`` merged in order (so the latest value of each name, e.g.
    ``loss``, ``eval_loss``, ``epoch``, ``step``), and the checkpoint is a copy of the
    newest ``checkpoint-<step>`` folder under ``args.output_dir``; then
    ``train.report(metrics, checkpoint=...)``. Each kept checkpoint directory is::

        checkpoint_00000N/
            checkpoint/         the Transformers checkpoint (model, optimizer, trainer state)

    which ``trainer.train(resume_from_checkpoint=...)`` resumes from and
    ``AutoModel...from_pretrained`` loads. A rank that finds no checkpoint folder
    reports its metrics alone. The ranks wait for each other (a barrier) before copying,
    so the copy holds every rank's files.

    Metrics are only as fresh as the last log: set ``logging_strategy`` (and
    ``eval_strategy``, for ``eval_*`` metrics) to match ``save_strategy``.

    Runs inside the training function; if copying or reporting raises, the error ends
    ``trainer.train()`` and so the training function.
    """

    CHECKPOINT_NAME = "checkpoint"

    def on_save(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # Every rank writes into the checkpoint folder (its RNG state, say): copy it
            # only once all of them are done.
            torch.distributed.barrier()
        metrics: dict[str, Any] = {}
        for entry in state.log_history:
            metrics.update(entry)
        output = args.output_dir
        source = _last_checkpoint(output) if output and os.path.isdir(output) else None
        with tempfile.TemporaryDirectory(prefix="transformers-checkpoint-") as folder:
            checkpoint = None
            if source is not None:
                shutil.copytree(source, os.path.join(folder, self.CHECKPOINT_NAME))
                checkpoint = Checkpoint.from_directory(folder)
            report(metrics, checkpoint=checkpoint)
