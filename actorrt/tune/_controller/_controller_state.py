"""What one run of an experiment holds, and what every part of the controller uses.

:class:`ControllerState` is the bottom of the controller: the experiment's settings, its
searcher, scheduler, stopper, storage, journal, callbacks and progress output, the trials and
their tasks; and the few operations every part above uses: telling the loop that something
changed, ending the experiment with an error, ending a trial (``TERMINATED`` or ``ERROR``),
recording a checkpoint, giving back a trial's placement groups, and stopping everything.

The controller is built up in layers, each a subclass of the one below, each calling only
down: this state; :mod:`._trial_launch` (starting trials, their attempts and retries);
:mod:`._scheduler_actions` (what schedulers do to trials); :mod:`._result_handling` (each
report and its decision); :mod:`._controller` (the experiment's loop).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import secrets
import socket
from typing import Any

import actorrt

from .._worker._spec import Outcome
from .._worker._trial_actor import ship_trainable
from ..callback import CallbackRunner, warn_unsaved_callback_state
from ..experiment._lifecycle import AttemptEnd
from ..experiment.trial import ERROR, PENDING, RUNNING, TERMINATED, Trial
from ..result_grid import ResultGrid, grid_of
from ..schedulers.trial_scheduler import FIFOScheduler, TrialScheduler
from ..search.basic_variant import BasicVariantGenerator
from ..search.concurrency_limiter import ConcurrencyLimiter
from ..search.searcher import Searcher
from ..search.util import set_search_properties_compatibly
from ..stopper._from_config import to_stopper
from ..stopper.stopper import Stopper
from ..trainable.trainable import Trainable
from ..tune_config import RunConfig, TuneConfig, limited_search_alg
from ._bus import reports_ahead_setting
from ._experiment_state import make_header
from ._prepare import DEFAULT_STORAGE, check_checkpoint_config, experiment_name, trainable_name
from ._progress import ProgressReporter
from ._recorder import ExperimentRecorder
from ._restore import RestoredExperiment
from ._result_checks import ResultChecker, flat_view
from ._storage import ExperimentStorage, writing
from ._trial_config import CheckpointConfig, FailureConfig

__all__ = ["STOP_GRACE_S", "ControllerState"]

logger = logging.getLogger("actorrt.tune")

STOP_GRACE_S = 2.0  # a trial told to stop gets this long to reach its next report


class ControllerState:
    """One experiment's run: its settings, parts and trials (see the module docstring).

    With ``restored`` (what ``Tuner.restore`` read), it continues that experiment in its
    folder instead of starting a new one.
    """

    def __init__(
        self,
        trainable: Any,
        param_space: dict[str, Any],
        tune_config: TuneConfig,
        run_config: RunConfig,
        restored: RestoredExperiment | None = None,
        prepared: tuple[str, str] | None = None,
    ) -> None:
        check_checkpoint_config(trainable, run_config.checkpoint_config)
        self.restored = restored
        # prepared: the name and tag Tuner() chose when it wrote the experiment's header.
        self._tag = (
            restored.header.tag if restored else prepared[1] if prepared
            else secrets.token_hex(3)[:5]
        )
        # Pickled now, before the searcher and scheduler below take the experiment's
        # settings: a restore starts from them as they were given.
        header = None if restored else make_header(
            trainable_name(trainable), self._tag, param_space, tune_config, run_config
        )
        self.trainable = trainable
        self.shipped_trainable = ship_trainable(trainable)  # what trial actors start with
        self.param_space = param_space
        self.tune_config = tune_config
        self.run_config = run_config
        self.failure = run_config.failure_config or FailureConfig()
        self.checkpoint_config = run_config.checkpoint_config or CheckpointConfig()
        name = prepared[0] if prepared and not restored else experiment_name(
            trainable, run_config
        )
        self.storage = ExperimentStorage(run_config.storage_path or DEFAULT_STORAGE, name)
        self.record = ExperimentRecorder(
            self.storage, header, restored.journal if restored else None
        )
        self.name = name
        self.searcher = self._make_searcher()
        self.scheduler: TrialScheduler = tune_config.scheduler or FIFOScheduler()
        self.scheduler.set_search_properties(tune_config.metric, tune_config.mode)
        self.stopper = to_stopper(run_config.stop)
        # Where nothing decides on a trial's results but the experiment's end, a function
        # trainable's reports need not wait for their answers (Session.send): up to this
        # many go ahead. Not a class Trainable's: the checkpoint it is asked for when told to
        # stop must hold the state of the result it was stopped at.
        self.reports_ahead = (
            reports_ahead_setting()
            if type(self.scheduler) is FIFOScheduler
            and type(self.stopper) is Stopper
            and not (isinstance(trainable, type) and issubclass(trainable, Trainable))
            else 0
        )
        self.progress = ProgressReporter(
            run_config.verbose, tune_config.metric, tune_config.mode,
            reporter=run_config.progress_reporter,
        )
        # Imported here: the TensorBoard logger's module is needed only once a run starts,
        # not by ``import actorrt.tune`` or ``Tuner``'s import.
        from ..logger.tensorboardx import default_callbacks

        given = list(run_config.callbacks or [])
        self.callbacks = CallbackRunner([*given, *default_callbacks(given)], self._fail)
        inner = getattr(self.searcher, "searcher", self.searcher)
        self.checks = ResultChecker(
            tune_config.metric,
            self.scheduler,
            not isinstance(self.scheduler, FIFOScheduler),
            inner,
            not isinstance(inner, BasicVariantGenerator),
        )
        self._fatal: BaseException | None = None
        self._chdir = True
        if restored is not None:
            warn_unsaved_callback_state(given)
        self.trials: list[Trial] = []
        self._by_id: dict[str, Trial] = {}
        self._tasks: dict[asyncio.Task[None], Trial] = {}
        self._context = contextvars.copy_context()  # the run's own (set again by run())
        self._refs: dict[str, Any] = {}
        self._kills: set[asyncio.Future[Any]] = set()
        self._pending = 0
        self._search_done = False
        self._stopping = False
        # The callbacks' preparation off the loop, while it runs (a stop does not wait for it).
        self._preparing: asyncio.Future[None] | None = None
        self._warned_pause = False
        self._replaying = False
        self._hostname = socket.gethostname()
        self._changed: asyncio.Event | None = None
        self.bus: Any = None
        self._aborted = False
        self.stop_reason = "cancelled"  # why a run was cut off; Tuner.fit() names the signal
        self._resumable = True  # False: what ended the run would end a resumed run too

    def _make_searcher(self) -> Searcher:
        config = self.tune_config
        searcher = limited_search_alg(config.search_alg, config.max_concurrent_trials)
        if searcher is None:
            searcher = BasicVariantGenerator()
            if config.max_concurrent_trials:
                searcher = ConcurrencyLimiter(searcher, config.max_concurrent_trials)
        set_search_properties_compatibly(
            searcher.set_search_properties, config.metric, config.mode, self.param_space,
            num_samples=config.num_samples, seed=config.seed,
        )
        return searcher

    # -------------------------------------------------- telling the loop

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _fail(self, exc: BaseException) -> None:
        """End the experiment with ``exc`` (a callback raised; a result Ray rejects): the
        controller's loop raises it at once, so ``fit()`` does."""
        if self._fatal is None:
            self._fatal = exc
        self._notify()

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # ----------------------------------------------------- a trial's end

    def _complete(self, trial: Trial) -> None:
        trial.set_status(TERMINATED)
        if trial.last_result:
            trial.last_result["done"] = True
        self.scheduler.on_trial_complete(self, trial, flat_view(trial.last_result))
        self.searcher.on_trial_complete(
            trial.trial_id, result=flat_view(trial.last_result), error=False
        )
        # Its end reaches the journal once its results are in its files: a restore never
        # finds a finished trial whose last results a kill lost.
        self.storage.close_trial(trial.path, then=lambda: self._record_end(trial))
        self.progress.trial_status(trial)
        self.callbacks.trial_complete(self.trials, trial)
        self._notify()

    def _errored(
        self, trial: Trial, outcome: Outcome, error: BaseException | None
    ) -> None:
        trial.set_status(ERROR)
        trial.error_text = outcome.error_text
        trial.config_error = outcome.config_error
        if error is None:
            error = actorrt.ActorrtError(f"trial {trial.trial_id} failed: {outcome.error_type}")
        if trial.error_text and not getattr(error, "__notes__", None):
            error.add_note(f"trial {trial.trial_name}: {trial.error_text.rstrip()}")
        trial.error = error
        self.scheduler.on_trial_error(self, trial)
        self.searcher.on_trial_complete(
            trial.trial_id, result=flat_view(trial.last_result), error=True
        )
        self.storage.close_trial(trial.path, then=lambda: self._record_end(trial))
        error_file = os.path.join(trial.path, "error.txt")
        try:
            with writing(error_file, "write"), open(error_file, "w", encoding="utf-8") as f:
                f.write(trial.error_text or repr(error))
        except OSError as exc:  # the disk is full: the trial's error stays in memory
            self._fail(exc)
        self.progress.trial_status(trial, f"{type(error).__name__}: {error}")
        self.callbacks.trial_error(self.trials, trial)
        if self.failure.fail_fast:
            self.stop_all("fail_fast")
        self._notify()

    def _record_end(self, trial: Trial) -> None:
        """Journal the trial's end (its results are in its files by now)."""
        try:
            self.record.end(trial, self.searcher)
        except OSError as exc:  # the disk is full: the experiment cannot go on
            self._fail(exc)

    def _add_checkpoint(self, trial: Trial, path: str, result: dict[str, Any]) -> None:
        record = trial.record_checkpoint(path, result, self.checkpoint_config)
        self.record.checkpoint(trial, record)
        trial.prune_checkpoints(self.checkpoint_config)  # after the journal has the new one

    # -------------------------------------------------- placement groups

    async def _drop_group(self, trial: Trial) -> None:
        group, trial.group = trial.group, None
        if group is not None:
            await group.remove()

    async def _drop_resize(self, trial: Trial) -> None:
        resize, trial.resize = trial.resize, None
        if trial.ending is AttemptEnd.RESIZE:
            trial.ending = None
        if resize is not None:
            await resize[1].remove()

    def _forget(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._kills.add(task)
        task.add_done_callback(self._kills.discard)

    # ---------------------------------------------------------- stopping

    def stop_all(self, why: str) -> None:
        """Stop the experiment: no new trials; waiting ones are withdrawn; running ones are
        told to stop at their next report, and killed if they do not within a grace."""
        if self._stopping:
            return
        self._stopping = True
        self.progress.note(f"stopping the experiment: {why}")
        if self._preparing is not None:
            self._preparing.cancel()  # its thread finishes by itself; nothing waits for it
        for task, trial in list(self._tasks.items()):
            if trial.status == PENDING and trial.ending is not AttemptEnd.RESIZE:
                task.cancel()
            else:
                trial.stop_asked = True
        asyncio.get_running_loop().call_later(STOP_GRACE_S, self._kill_running)
        self._notify()

    def _kill_running(self) -> None:
        for trial_id, ref in list(self._refs.items()):
            trial = self._by_id[trial_id]
            if trial.status == RUNNING and trial.stop_asked:
                kill = asyncio.ensure_future(ref.kill())
                self._kills.add(kill)
                kill.add_done_callback(self._kills.discard)

    # ----------------------------------------------------------- results

    def result_grid(self) -> ResultGrid:
        return grid_of(
            self.trials, self.storage.path, self.tune_config.metric, self.tune_config.mode
        )
