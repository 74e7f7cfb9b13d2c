"""The results an experiment folder holds now, read without changing it: what
``Tuner.get_results()`` returns for a restored tuner that has not run (as Ray reads a
restored experiment's results)."""

from __future__ import annotations

import os

from ..experiment.trial import ERROR, RUNNING, CheckpointRecord, Trial, trainable_name_of
from ..result_grid import ResultGrid, grid_of
from ._restore import RestoredExperiment, _error, _last_result

__all__ = ["saved_results"]


def saved_results(restored: RestoredExperiment) -> ResultGrid:
    """Every trial of the experiment as its journal and files tell it; a trial that had
    not finished when the experiment stopped shows as ``RUNNING``, with what it reported."""
    trials = []
    for record in restored.journal.trials:
        path = os.path.join(restored.path, record.dirname)
        trial = Trial(
            trainable_name_of(record.trial_name, record.trial_id), config=record.config,
            trial_id=record.trial_id, trial_name=record.trial_name, path=path,
        )
        trial.status = record.status or RUNNING
        trial.checkpoints = [
            CheckpointRecord(os.path.join(path, c.dirname), c.score, c.iteration, c.time_total_s)
            for c in record.checkpoints
            if os.path.isdir(os.path.join(path, c.dirname))
        ]
        trial.last_result, trial.num_results = _last_result(path)
        if trial.status == ERROR:
            trial.error = _error(record)
            trial.error_text = record.error_text
        trials.append(trial)
    config = restored.tune_config
    return grid_of(trials, restored.path, config.metric, config.mode)
