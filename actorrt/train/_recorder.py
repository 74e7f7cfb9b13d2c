"""What the coordinator does with each of rank 0's reports, in order: log it to the run's
``result.json``, record its checkpoint, call the run's ``UserCallback``s, and in a Tune
trial report it to the trial."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import IO, Any

from .._shared._checkpoint import Checkpoint
from .._shared._trial_hook import EnclosingTrial
from ._checkpoint_book import CheckpointBook

# What the run's UserCallbacks do with a report: every rank's metrics, the checkpoint.
AfterReport = Callable[[list[dict[str, Any]], Checkpoint | None], Awaitable[None]]


class Recorder:
    """What the coordinator does with each of rank 0's reports, in order: keep it, and in
    a Tune trial report it to the trial. ``stopped`` turns true when Tune says stop; no
    report is taken after that."""

    def __init__(
        self, book: CheckpointBook, results: IO[str], trial: EnclosingTrial | None,
        after_report: AfterReport | None = None,
        for_trial: Callable[[dict[str, Any], str | None], dict[str, Any]] | None = None,
    ) -> None:
        self.after_report = after_report  # the run's UserCallbacks, when it has some
        # What the enclosing trial gets of a report (a callback's say, e.g. Tune's
        # TuneReportCallback adds the checkpoint's path); the metrics as they are otherwise.
        self.for_trial = for_trial
        self.history: list[dict[str, Any]] = []
        self.book = book
        self.results = results
        self.trial = trial
        self.stopped = False
        self.attempt_metrics: dict[int, dict[str, Any]] = {}  # rank 0's, by report index
        self._index = 0

    def attempt_started(self, base: int) -> None:
        """A new gang starts: its rank 0's ``k``-th report is report ``base + k``."""
        self._index = base
        self.attempt_metrics = {}

    async def __call__(
        self, metrics: dict[str, Any], checkpoint: str | None,
        every: list[dict[str, Any]] | None = None,
    ) -> bool:
        if self.stopped:
            return False
        self.attempt_metrics[self._index] = metrics
        self._index += 1
        self.history.append(metrics)
        if checkpoint is not None:
            self.book.add(Checkpoint(checkpoint), metrics)
        self.results.write(json.dumps(metrics, default=repr) + "\n")
        if self.after_report is not None:
            stored = Checkpoint(checkpoint) if checkpoint is not None else None
            await self.after_report(list(every or [metrics]), stored)
        to_trial = self.for_trial(metrics, checkpoint) if self.for_trial else metrics
        if self.trial is not None and not await self.trial.report_async(to_trial, checkpoint):
            self.stopped = True
        return not self.stopped
