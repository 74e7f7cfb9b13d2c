"""The experiment's record: what the controller writes, as things happen, for ``Tuner.restore``.

One :class:`ExperimentRecorder` per run of ``fit()``. It writes the header of a new
experiment, appends one journal line per event, and saves the searcher's state when it
changed (the files are described in :mod:`._experiment_state`). Each method is one small
synchronous write on the controller's loop, made at the moment the event happens, so what is
on disk is never behind what the controller has decided.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import cloudpickle

from ..experiment.trial import ERROR, TERMINATED, CheckpointRecord
from ._experiment_state import (
    JOURNAL_FILE,
    Header,
    Journal,
    JournalState,
    dumps_b64,
    write_header,
    write_searcher_state,
)

if TYPE_CHECKING:
    from ..experiment.trial import Trial
    from ..search.searcher import Searcher
    from ._storage import ExperimentStorage

__all__ = ["ExperimentRecorder"]

logger = logging.getLogger("actorrt.tune")


class ExperimentRecorder:
    """Writes one run's part of the experiment's record.

    Args:
        storage: the experiment folder.
        header: a new experiment's header (written by :meth:`open`); ``None`` for a restored
            one, whose journal is appended to.
        restored: the restored experiment's journal, folded.
    """

    def __init__(
        self, storage: ExperimentStorage, header: Header | None, restored: JournalState | None
    ) -> None:
        self.storage = storage
        self.header = header
        self.restored = restored
        self._journal: Journal | None = None
        self._searcher_blob: bytes | None = None
        self._warned = False

    @property
    def journal(self) -> Journal:
        assert self._journal is not None, "the record opens when the run starts"
        return self._journal

    def open(self, *, metric: str | None, mode: str | None) -> None:
        """Start this run's record.

        Raises:
            RuntimeError: another process runs this experiment now.
        """
        path = self.storage.path
        if self.restored is not None:
            state = self.restored
            self._journal = Journal(path, fresh=False, elapsed=state.elapsed, lines=state.lines)
        else:
            journal_file = os.path.join(path, JOURNAL_FILE)
            if os.path.exists(journal_file) and os.path.getsize(journal_file) > 0:
                logger.warning(
                    "tune: %s held an experiment already; a new one starts there (use "
                    "Tuner.restore to continue an experiment instead)", path,
                )
            journal = Journal(path, fresh=True)  # locks the folder before the header changes
            assert self.header is not None
            write_header(path, self.header)
            self._journal = journal
        self.journal.append(
            "start", restored=self.restored is not None, pid=os.getpid(), metric=metric, mode=mode
        )

    def elapsed(self) -> float:
        """The experiment's running time over all its runs."""
        return self.journal.elapsed()

    def trial(self, trial: Trial, searcher: Searcher) -> None:
        """A trial was created (the searcher has just suggested it)."""
        resources = trial.resources
        self.journal.append(
            "trial",
            id=trial.trial_id,
            name=trial.trial_name,
            dir=os.path.relpath(trial.path, self.storage.path),
            config=dumps_b64(trial.config),
            resources=None if resources is None
            else {"bundles": resources.group_bundles, "strategy": resources.strategy},
        )
        self.searcher(searcher)

    def checkpoint(self, trial: Trial, record: CheckpointRecord) -> None:
        """A checkpoint of ``trial`` was recorded, after the result that came with it was
        written: the trial's logs end where a resume from it cuts them back to."""
        result_bytes, progress_bytes = self.storage.sizes(trial.path)
        self.journal.append(
            "checkpoint", durable=True, id=trial.trial_id, dir=os.path.basename(record.path),
            score=record.score, iteration=record.iteration, time_total_s=record.time_total_s,
            result_bytes=result_bytes, progress_bytes=progress_bytes,
        )

    def restart(self, trial: Trial, record: CheckpointRecord) -> None:
        """A scheduler (PBT) gave ``trial`` a new config and a checkpoint to restart from."""
        self.journal.append("config", id=trial.trial_id, config=dumps_b64(trial.config))
        self.checkpoint(trial, record)

    def end(self, trial: Trial, searcher: Searcher) -> None:
        """``trial`` ended: ``TERMINATED`` or ``ERROR`` (with its exception)."""
        if trial.status == ERROR:
            error = trial.error
            self.journal.append(
                "end", durable_soon=True, id=trial.trial_id, status=ERROR,
                error=_error_b64(error) if error is not None else None,
                error_type=type(error).__name__, error_text=trial.error_text,
            )
        else:
            self.journal.append("end", durable_soon=True, id=trial.trial_id, status=TERMINATED)
        self.searcher(searcher)

    def searcher(self, searcher: Searcher) -> None:
        """Save the searcher's state if it changed since it was last saved."""
        try:
            blob = bytes(cloudpickle.dumps(searcher.get_state()))
        except Exception as exc:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "tune: the searcher's state cannot be pickled (%s: %s); a restore will "
                    "start it afresh", type(exc).__name__, exc,
                )
            return
        if blob != self._searcher_blob:
            self._searcher_blob = blob
            write_searcher_state(self.storage.path, blob, self.journal.lines)

    def close(self, *, interrupted: str | None) -> bool:
        """End this run's record: ``interrupted`` says why it was cut off, if it was.
        Returns whether there was a record to end (``open`` may have failed)."""
        if self._journal is None:
            return False
        if interrupted is not None:
            self._journal.append("interrupted", why=interrupted)
        else:
            self._journal.append("finished")
        self._journal.close()
        self._journal = None
        return True


def _error_b64(error: BaseException) -> str | None:
    try:
        return dumps_b64(error)
    except Exception:  # an exception that does not pickle: its text is recorded
        return None
