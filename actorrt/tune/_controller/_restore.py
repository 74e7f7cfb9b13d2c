"""``Tuner.restore``: read an experiment folder back and decide what each trial does next.

:func:`load_experiment` checks the folder and reads its header, journal and searcher state
(:mod:`._experiment_state`); every problem is a ``ValueError`` (or ``TypeError``) naming
the value, raised by ``Tuner.restore`` itself. When ``fit()`` runs, the controller calls
:func:`rebuild_trials`, :func:`replay_scheduler` and :func:`restore_searcher`:

- a trial that ended (``TERMINATED``) is kept with its results and never runs again;
- an unfinished trial (running or waiting when the experiment stopped) resumes from its
  latest checkpoint, or from the start without one (``resume_unfinished=False``: kept as
  ``TERMINATED`` with the results it has);
- an errored trial is kept as ``ERROR``, or resumes from its latest checkpoint
  (``resume_errored``), or starts over with its checkpoints deleted (``restart_errored``).

A trial that resumes from a checkpoint has its ``result.json`` and ``progress.csv`` cut back
to their sizes when that checkpoint was recorded: the iterations after it run again, and
each appears once. The scheduler is rebuilt by replaying every kept result through it (its
decisions are ignored); the searcher gets its saved state back and skips the configs that
already have trials.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import cloudpickle

import actorrt

from ..._shared._storage_path import check_experiment_dir, ensure_experiment_dir
from .._worker._checkpoint_dirs import next_checkpoint_index
from ..experiment.trial import (
    ERROR,
    PENDING,
    TERMINATED,
    CheckpointRecord,
    Trial,
    trainable_name_of,
)
from ..search.sample import Domain
from ..search.searcher import Searcher, resume_search
from ..tune_config import RunConfig, TuneConfig
from ._experiment_state import (
    HEADER_FILE,
    JOURNAL_FILE,
    Header,
    JournalCheckpoint,
    JournalState,
    TrialRecord,
    Unsaved,
    check_not_running,
    flat_keys,
    fold_journal,
    loads_b64,
    read_header,
    read_journal,
    read_searcher_state,
)
from ._recover import recover_lost_trials
from ._storage import PROGRESS_FILE, RESULT_FILE, read_results, trim_torn_tail

logger = logging.getLogger("actorrt.tune")

if TYPE_CHECKING:
    from ..schedulers.trial_scheduler import TrialScheduler
    from ._storage import ExperimentStorage

__all__ = [
    "Rebuilt",
    "RestoredExperiment",
    "ResumeOptions",
    "can_restore",
    "load_experiment",
    "rebuild_trials",
    "replay_scheduler",
    "restore_searcher",
]

@dataclasses.dataclass(frozen=True)
class ResumeOptions:
    """What ``Tuner.restore`` does with trials that did not finish cleanly (Ray's flags)."""

    resume_unfinished: bool = True
    resume_errored: bool = False
    restart_errored: bool = False

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, bool):
                raise TypeError(f"Tuner.restore: {field.name} must be True or False, got {value!r}")
        if self.resume_errored and self.restart_errored:
            raise ValueError(
                "Tuner.restore: resume_errored=True and restart_errored=True contradict each "
                "other; resume errored trials from their checkpoints (resume_errored) or "
                "restart them from scratch (restart_errored), not both"
            )


@dataclasses.dataclass
class RestoredExperiment:
    """An experiment folder, read and checked by :func:`load_experiment`."""

    path: str
    header: Header
    param_space: dict[str, Any]
    tune_config: TuneConfig
    run_config: RunConfig
    journal: JournalState
    searcher_state: tuple[Any, int] | None  # the state, the journal lines it is current to
    options: ResumeOptions


def _experiment_path(path: Any) -> str:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"Tuner.restore: path must be a str or os.PathLike (an experiment folder), got "
            f"{type(path).__name__}: {path!r}"
        )
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def can_restore(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an experiment folder that ``Tuner.restore`` can read."""
    try:
        folder = _experiment_path(path)
    except TypeError:
        return False
    return all(os.path.isfile(os.path.join(folder, name)) for name in (HEADER_FILE, JOURNAL_FILE))


def _check_folder(folder: str, given: Any) -> None:
    where = "pass the folder Tuner.fit() wrote: storage_path/name (ResultGrid.experiment_path)"
    if not os.path.exists(folder):
        raise ValueError(f"Tuner.restore: {given!r} does not exist; {where}")
    if not os.path.isdir(folder):
        raise ValueError(f"Tuner.restore: {given!r} is a file, not an experiment folder; {where}")
    if can_restore(folder):
        return
    parent = os.path.dirname(folder)
    if os.path.isfile(os.path.join(folder, "params.json")) and can_restore(parent):
        raise ValueError(
            f"Tuner.restore: {given!r} is a trial's folder; restore its experiment: {parent!r}"
        )
    names = (HEADER_FILE, JOURNAL_FILE)
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    raise ValueError(
        f"Tuner.restore: {given!r} is not a Tune experiment folder: it has no "
        f"{' and no '.join(missing)}; {where}"
    )


def _load_piece(header: Header, piece: str, folder: str) -> Any:
    blob = getattr(header, piece)
    if blob is None:
        why = header.unsaved.get(piece, "not saved")
        raise ValueError(
            f"Tuner.restore: the experiment in {folder!r} cannot be restored: its {piece} could "
            f"not be saved when it started ({why})"
        )
    try:
        return cloudpickle.loads(blob)
    except Exception as exc:
        raise ValueError(
            f"Tuner.restore: the {piece} saved in {folder!r} cannot be loaded "
            f"({type(exc).__name__}: {exc}); make the modules it uses importable here"
        ) from exc


def _unsaved(value: Any) -> list[Unsaved]:
    if isinstance(value, Unsaved):
        return [value]
    if isinstance(value, Mapping):
        return [u for v in value.values() for u in _unsaved(v)]
    if isinstance(value, list | tuple):
        return [u for v in value for u in _unsaved(v)]
    return []


def _lookup(space: Any, where: str) -> Any:
    for key in where.split("/") if where else []:
        if isinstance(space, Mapping) and key in space:
            space = space[key]
        elif isinstance(space, list | tuple) and key.isdigit() and int(key) < len(space):
            space = space[int(key)]
        else:
            raise KeyError(where)
    return space


def _fill(value: Any, space: dict[str, Any] | None, trial_id: str) -> Any:
    """A config with its unsaved values taken from the same place in ``space``."""
    if isinstance(value, Unsaved):
        hint = (
            "pass param_space= to Tuner.restore with the value to use there"
            if space is None
            else "the param_space given to Tuner.restore has no plain value there"
        )
        try:
            found = _lookup(space, value.where) if space is not None else None
        except KeyError:
            found = None
        if space is None or found is None or isinstance(found, Domain | Mapping):
            raise ValueError(
                f"Tuner.restore: trial {trial_id}'s config value at {value.where!r} could not be "
                f"saved ({value.why}); {hint}"
            )
        return found
    if isinstance(value, dict):
        return {k: _fill(v, space, trial_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, space, trial_id) for v in value]
    return value


def _param_space(
    header: Header, given: dict[str, Any] | None, folder: str
) -> dict[str, Any]:
    if given is None:
        space = _load_piece(header, "param_space", folder)
        holes = _unsaved(space)
        if holes:
            raise ValueError(
                f"Tuner.restore: the param_space value at {holes[0].where!r} could not be saved "
                f"({holes[0].why}); pass param_space= to Tuner.restore (the same space)"
            )
        return dict(space)
    if not isinstance(given, dict):
        raise ValueError(f"Tuner.restore: param_space must be a dict, got {given!r}")
    keys, saved = set(flat_keys(given)), set(header.param_keys)
    if keys != saved:
        raise ValueError(
            "Tuner.restore: param_space must be the experiment's own space (values may be "
            f"given again, keys may not change); missing: {sorted(saved - keys)}, "
            f"not in the experiment: {sorted(keys - saved)}"
        )
    return dict(given)


def load_experiment(
    path: Any,
    trainable_name: str,
    param_space: dict[str, Any] | None,
    options: ResumeOptions,
) -> RestoredExperiment:
    """Read and check the experiment folder ``path`` (see the module docstring).

    Raises:
        TypeError: ``path`` is not a path.
        ValueError: ``path`` is not an experiment folder, its files cannot be read, the
            trainable's name differs from the experiment's, or ``param_space`` does not fit.
        PermissionError: the folder, a trial folder in it, or a file to unpickle is a link,
            another user's, or writable by others (checked before anything is unpickled).
        RuntimeError: another process runs the experiment now.
    """
    folder = _experiment_path(path)
    _check_folder(folder, path)
    # Before anything in it is opened: restoring unpickles its files, so it must be
    # this user's alone (not a link, not another user's, not writable by others).
    check_experiment_dir(folder, "Tuner.restore: the experiment folder")
    check_not_running(folder)
    header = read_header(folder)
    if header.trainable_name != trainable_name:
        raise ValueError(
            f"Tuner.restore: the experiment in {folder!r} ran the trainable "
            f"{header.trainable_name!r}, got {trainable_name!r}; pass the same trainable (it "
            "may be defined again, in a new script, under the same name)"
        )
    tune_config = _load_piece(header, "tune_config", folder)
    run_config = _load_piece(header, "run_config", folder)
    space = _param_space(header, param_space, folder)
    journal = fold_journal(read_journal(folder))
    recover_lost_trials(folder, header.tag, journal, run_config.checkpoint_config)
    for record in journal.trials:
        record.config = _fill(record.config, param_space, record.trial_id)
    saved = read_searcher_state(folder)
    searcher_state = None
    if saved is not None:
        state, lines = saved
        try:
            searcher_state = (cloudpickle.loads(state), lines)
        except Exception as exc:
            raise ValueError(
                f"Tuner.restore: the searcher state saved in {folder!r} cannot be loaded "
                f"({type(exc).__name__}: {exc})"
            ) from exc
    # The folder may have moved: the restored run writes where it is now.
    run_config = dataclasses.replace(
        run_config, storage_path=os.path.dirname(folder), name=os.path.basename(folder)
    )
    return RestoredExperiment(
        folder, header, space, tune_config, run_config, journal, searcher_state, options
    )


# ---------------------------------------------------------------------- at fit() time


def _last_result(trial_dir: str) -> tuple[dict[str, Any], int]:
    results = read_results(trial_dir)
    last = dict(results[-1]) if results else {}
    last.pop("config", None)
    return last, len(results)


def _error(record: TrialRecord) -> BaseException:
    error: BaseException | None = None
    if record.error:
        with contextlib.suppress(Exception):
            loaded = loads_b64(record.error)
            error = loaded if isinstance(loaded, BaseException) else None
    if error is None:
        error = actorrt.ActorrtError(
            f"trial {record.trial_id} failed: {record.error_type or 'an error'}"
        )
    if record.error_text and not getattr(error, "__notes__", None):
        error.add_note(f"trial {record.trial_name}: {record.error_text.rstrip()}")
    return error


def _action(record: TrialRecord, options: ResumeOptions) -> str:
    if record.status == TERMINATED:
        return "keep"
    if record.status == ERROR:
        if options.restart_errored:
            return "restart"
        return "resume" if options.resume_errored else "keep"
    return "resume" if options.resume_unfinished else "keep"


@dataclasses.dataclass
class Rebuilt:
    """The restored trials: all, in creation order; those that run again (``PENDING``,
    result logs cut back to their checkpoint); and unfinished ones that this restore ends
    as ``TERMINATED`` (``resume_unfinished=False``), whose end is to be recorded."""

    trials: list[Trial]
    to_run: list[Trial]
    closed: list[Trial]


def _trim_torn(path: str, record: TrialRecord) -> None:
    """Drop a log's last line when a crash cut it short, saying so: that result is lost."""
    cut = trim_torn_tail(path)
    if cut:
        logger.warning(
            "tune: %s ended in a line cut short (%d bytes: a result being written when the "
            "experiment stopped); trial %s is restored without it",
            path, cut, record.trial_name,
        )


def _kept_checkpoints(path: str, record: TrialRecord) -> list[JournalCheckpoint]:
    """The recorded checkpoints whose folders are there. Older ones deleted by
    ``num_to_keep`` are missing as they should be; a checkpoint replaced by a file, or a
    missing latest one (never deleted), is left out with a warning naming it."""
    kept = []
    for c in record.checkpoints:
        folder = os.path.join(path, c.dirname)
        if os.path.isdir(folder):
            kept.append(c)
        elif os.path.lexists(folder) or c is record.checkpoints[-1]:
            what = "is not a folder" if os.path.lexists(folder) else "is missing"
            logger.warning(
                "tune: %s, a checkpoint of trial %s recorded in the journal, %s; it is left "
                "out, so the trial's latest checkpoint is %s",
                folder, record.trial_name, what,
                os.path.join(path, kept[-1].dirname) if kept else "none (it starts over)",
            )  # fmt: skip
    return kept


def rebuild_trials(restored: RestoredExperiment, storage: ExperimentStorage) -> Rebuilt:
    """Every trial of the experiment, as :class:`Rebuilt` says."""
    trials: list[Trial] = []
    to_run: list[Trial] = []
    closed: list[Trial] = []
    for record in restored.journal.trials:
        path = os.path.join(storage.path, record.dirname)
        ensure_experiment_dir(path, "the trial folder")
        trial = Trial(
            trainable_name_of(record.trial_name, record.trial_id), config=record.config,
            trial_id=record.trial_id, trial_name=record.trial_name, path=path,
        )
        for name in (RESULT_FILE, PROGRESS_FILE):
            _trim_torn(os.path.join(path, name), record)
        kept = _kept_checkpoints(path, record)
        action = _action(record, restored.options)
        if action == "restart":
            for c in record.checkpoints:
                shutil.rmtree(os.path.join(path, c.dirname), ignore_errors=True)
            kept = []
        trial.checkpoints = [
            CheckpointRecord(os.path.join(path, c.dirname), c.score, c.iteration, c.time_total_s)
            for c in kept
        ]
        # Past every recorded checkpoint and every folder on disk (one written but not
        # recorded before a crash); leftover temporary copies are removed.
        trial.checkpoint_count = next_checkpoint_index(path, len(record.checkpoints))
        if action == "keep":
            trial.status = record.status or TERMINATED
            if record.status is None:
                closed.append(trial)
            if trial.status == ERROR:
                trial.error = _error(record)
                trial.error_text = record.error_text
        else:
            latest = kept[-1] if kept else None
            storage.truncate_results(
                path,
                latest.result_bytes if latest else 0,
                latest.progress_bytes if latest else 0,
            )
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(path, "error.txt"))
            trial.status = PENDING
            to_run.append(trial)
        trial.last_result, trial.num_results = _last_result(path)
        if trial.status == TERMINATED and trial.last_result:
            trial.last_result["done"] = True
        trials.append(trial)
    return Rebuilt(trials, to_run, closed)


def replay_scheduler(scheduler: TrialScheduler, controller: Any, trials: list[Trial]) -> None:
    """Rebuild a fresh scheduler's state (ASHA's rungs, the median rule's histories, PBT's
    scores) by feeding it every kept result again, trial by trial in creation order; its
    decisions are ignored, and restarts it asks for (PBT) are dropped."""
    for trial in trials:
        scheduler.on_trial_add(controller, trial)
        for result in read_results(trial.path):
            result.pop("config", None)
            scheduler.on_trial_result(controller, trial, result)
        if trial.status == TERMINATED:
            scheduler.on_trial_complete(controller, trial, trial.last_result)
        elif trial.status == ERROR:
            scheduler.on_trial_error(controller, trial)
        trial.restart_with = None
        trial.stop_asked = False


def restore_searcher(
    searcher: Searcher, restored: RestoredExperiment, trials: list[Trial], to_run: list[Trial]
) -> None:
    """Give the searcher its saved state, tell it of trials that ended after that state was
    saved, and let it skip the configs that already have trials."""
    if restored.searcher_state is not None:
        by_id = {t.trial_id: t for t in trials}
        statuses = {r.trial_id: r.status for r in restored.journal.trials}
        state, lines = restored.searcher_state
        searcher.set_state(state)
        for line, trial_id in restored.journal.ends:
            if line > lines and trial_id in by_id:
                searcher.on_trial_complete(
                    trial_id,
                    result=by_id[trial_id].last_result,
                    error=statuses[trial_id] == ERROR,
                )
    resume_search(searcher, len(trials), {t.trial_id for t in to_run})
