"""The controller: makes trials, runs each as a trial-driver actor, and collects results.

It runs on the runtime's event loop, in the driver process. Each trial is one asyncio task
that spawns the trial's driver actor with the trial's factory as its own placement group
(``placement_group=bundles``, ``process=True``): the broker, not the controller, decides
when a trial's resources are free, so parallelism is exactly what the resources allow, and
a trial's declared workers are reserved atomically with it. Results come back through an
inline report-bus actor: each ``tune.report`` is one ask whose answer is the scheduler's
decision.

Up to ``max_pending`` trials wait for resources at a time (Ray's pending-trial limit): enough
to fill the cluster as soon as anything frees, without drawing every sample up front.

Everything ``Tuner.restore`` needs is written as it happens (:mod:`._experiment_state`): a
header when a new experiment starts, then one journal line per trial created, checkpoint
recorded, config changed and trial ended, and the searcher's state when it changes. A run
that is cancelled or fails (Ctrl-C, SIGTERM) leaves the trials it cut off unfinished in the
journal, and prints how to resume.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import secrets
import socket
import sys
import time
from typing import Any

import actorrt

from .._shared._checkpoint import Checkpoint
from ._bus import ReportBusActor, TrialDriverActor
from ._callbacks import CallbackList, default_callbacks, warn_unsaved_callback_state
from ._config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig, limited_search_alg
from ._experiment_state import make_header
from ._prepare import DEFAULT_STORAGE, check_checkpoint_config, experiment_name, trainable_name
from ._progress import ProgressReporter
from ._recorder import ExperimentRecorder
from ._resize import ClusterTotals, await_group, bundle_options, try_reserve
from ._resource_changing import ResourceChangingScheduler
from ._resources import PlacementGroupFactory, describe_request, resolve_resources
from ._restore import RestoredExperiment, rebuild_trials, replay_scheduler, restore_searcher
from ._result import ResultGrid, grid_of
from ._result_checks import ResultChecker
from ._schedulers import FIFOScheduler, TrialScheduler
from ._search import BasicVariantGenerator, ConcurrencyLimiter, Searcher
from ._session import CONTINUE, SAVE_AND_STOP, STOP
from ._stopper import to_stopper
from ._storage import ExperimentStorage, copy_dir_atomic
from ._trainable import Trainable
from ._trial import ERROR, PAUSED, PENDING, RUNNING, TERMINATED, Trial
from ._trial_actor import error_outcome, load_error
from ._variants import in_space_order
from ._workdir import chdir_enabled

__all__ = ["TuneController"]

logger = logging.getLogger("actorrt.tune")

STOP_GRACE_S = 2.0  # a trial told to stop gets this long to reach its next report
STOPPER_CHECK_S = 1.0  # how often a stopper's stop_all() is asked between results
STEP_S = 0.1  # the longest step of the controller (callbacks' on_step_begin/on_step_end)
MAX_PENDING_ENV = "ACTORRT_TUNE_MAX_PENDING_TRIALS"


class TuneController:
    """Runs one experiment to its end; see the module docstring.

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
        self.progress = ProgressReporter(
            run_config.verbose, tune_config.metric, tune_config.mode,
            reporter=run_config.progress_reporter,
        )
        given = list(run_config.callbacks or [])
        self.callbacks = CallbackList([*given, *default_callbacks(given)], self._fail)
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
        self._refs: dict[str, Any] = {}
        self._kills: set[asyncio.Future[Any]] = set()
        self._pending = 0
        self._search_done = False
        self._stopping = False
        self._warned_pause = False
        self._replaying = False
        self._hostname = socket.gethostname()
        self._changed: asyncio.Event | None = None
        self.bus: Any = None
        self._aborted = False
        self.stop_reason = "cancelled"  # why a run was cut off; Tuner.fit() names the signal

    def _make_searcher(self) -> Searcher:
        config = self.tune_config
        searcher = limited_search_alg(config.search_alg, config.max_concurrent_trials)
        if searcher is None:
            searcher = BasicVariantGenerator()
            if config.max_concurrent_trials:
                searcher = ConcurrencyLimiter(searcher, config.max_concurrent_trials)
        searcher.set_search_properties(
            config.metric, config.mode, self.param_space,
            num_samples=config.num_samples, seed=config.seed,
        )
        return searcher

    def _max_pending(self) -> int:
        if os.environ.get(MAX_PENDING_ENV):
            return max(1, int(os.environ[MAX_PENDING_ENV]))
        inner = self.searcher.searcher if isinstance(self.searcher, ConcurrencyLimiter) else None
        if not isinstance(inner or self.searcher, BasicVariantGenerator):
            return 1  # an adaptive searcher learns from results: suggest late
        cpus = actorrt.cluster_resources().get("CPU", 1.0)
        return max(16, math.ceil(cpus * 1.1))

    # ------------------------------------------------------------------ the loop

    async def run(self) -> ResultGrid:
        """Run every trial to its end and return the results."""
        loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        max_pending = self._max_pending()
        self._chdir = chdir_enabled()
        self.bus = await ReportBusActor.options(process=False).spawn(self)
        self.callbacks.setup(self.stopper, self.tune_config.num_samples, self.searcher)
        timers: list[asyncio.TimerHandle] = []
        status_task: asyncio.Task[None] | None = None
        stopper_task: asyncio.Task[None] | None = None
        try:
            self.record.open(metric=self.tune_config.metric, mode=self.tune_config.mode)
            if self.restored is not None:
                self._resume()
            if self.tune_config.time_budget_s is not None:
                # The budget counts the experiment's time over all its runs (restores).
                left = self.tune_config.time_budget_s - self.record.elapsed()
                timers.append(loop.call_later(max(left, 0.0), self.stop_all, "time budget"))
            if self.run_config.verbose >= 1:
                status_task = asyncio.create_task(self._status_loop())
            stopper_task = asyncio.create_task(self._watch_stopper())
            self._raise_fatal()
            while not await self._step(max_pending):
                pass
        except BaseException as exc:
            self._aborted = True  # trials cut off now stay unfinished, to be resumed
            if exc is self._fatal:
                self.stop_reason = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            for timer in timers:
                timer.cancel()
            for task in (status_task, stopper_task):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await self._cancel_all()
            if self._kills:
                await asyncio.gather(*self._kills, return_exceptions=True)
            await self.bus.stop()
            self.storage.close()
            closed = self.record.close(interrupted=self.stop_reason if self._aborted else None)
            if self._aborted and closed:
                self._print_resume_hint()
            self.callbacks.experiment_end(self.trials)
        self._raise_fatal()  # on_experiment_end raised
        self.progress.final(self.trials, self.storage.path)
        return self.result_grid()

    async def _watch_stopper(self) -> None:
        """Ask the stopper's ``stop_all()`` between results too (Ray asks at every step of
        its loop), so a ``TimeoutStopper`` ends an experiment whose trials report rarely."""
        while not self._stopping:
            await asyncio.sleep(STOPPER_CHECK_S)
            try:
                stop = self.stopper.stop_all()
            except Exception:  # asked again at the next result, where it reaches the trial
                logger.exception("tune: the stopper's stop_all() raised")
                return
            if stop:
                self.stop_all("stopper")

    async def _step(self, max_pending: int) -> bool:
        """One step, as Ray's controller takes them: ``on_step_begin``, start what can
        start, handle what comes in for up to ``STEP_S``, ``on_step_end``. Returns whether
        the experiment has finished."""
        assert self._changed is not None
        self.callbacks.step_begin(self.trials)
        self._raise_fatal()
        self._launch(max_pending)
        if not self._tasks and not self._stopping:
            self._resume_stranded()
        if not self._tasks and not (self._search_done or self._stopping):
            raise RuntimeError(
                f"tune: the search algorithm {self.searcher!r} answered 'not now' "
                "(None) while no trial runs, so the experiment would wait forever; a "
                "searcher may answer None only while some of its trials are live"
            )
        finished = not self._tasks and (self._search_done or self._stopping)
        if not finished:
            # A timer rather than asyncio.wait_for, which on Python 3.11 can swallow a
            # cancellation (Ctrl-C) that arrives as the wait ends.
            timer = asyncio.get_running_loop().call_later(STEP_S, self._changed.set)
            try:
                await self._changed.wait()
            finally:
                timer.cancel()
            self._changed.clear()
        self._raise_fatal()
        self.callbacks.step_end(self.trials)
        self._raise_fatal()
        return finished

    def _fail(self, exc: BaseException) -> None:
        """End the experiment with ``exc`` (a callback raised; a result Ray rejects): the
        controller's loop raises it at once, so ``fit()`` does."""
        if self._fatal is None:
            self._fatal = exc
        self._notify()

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    async def _status_loop(self) -> None:
        await self.progress.watch(self.trials, self._refs)

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _launch(self, max_pending: int) -> None:
        while not self._search_done and not self._stopping and self._pending < max_pending:
            counted = self.searcher.counts_samples
            if not counted and len(self.trials) >= self.tune_config.num_samples:
                self._search_done = True
                return
            trial_id = f"{self._tag}_{len(self.trials):05d}"
            config = self.searcher.suggest(trial_id)
            if config == Searcher.FINISHED:
                self._search_done = True
                return
            if not isinstance(config, dict):
                return  # not now: a limiter is full
            self._start(trial_id, config)

    def _start(self, trial_id: str, config: dict[str, Any]) -> None:
        config = in_space_order(config, self.param_space)
        name = f"{trainable_name(self.trainable)}_{trial_id}"
        trial = Trial(trial_id, name, config, None, "")
        creator = self.tune_config.trial_name_creator
        if creator is not None:
            trial.trial_name = str(creator(trial))
        dirname = self.tune_config.trial_dirname_creator
        trial.path = self.storage.trial_dir(str(dirname(trial)) if dirname else trial.trial_name)
        self.storage.write_params(trial.path, config)
        failure: Exception | None = None
        try:
            trial.resources = resolve_resources(self.trainable, config)
        except Exception as exc:  # a bad resources callable or dict: this trial's error
            failure = exc
        self.trials.append(trial)
        self._by_id[trial_id] = trial
        self.record.trial(trial, self.searcher)
        self.scheduler.on_trial_add(self, trial)
        self.progress.trial_status(trial)
        if failure is not None:
            self._errored(trial, error_outcome(failure) | {"config_error": True}, failure)
            return
        self._submit(trial)

    def _submit(self, trial: Trial) -> None:
        """Start a trial's task: it waits for the trial's resources, then runs it."""
        if trial.resources is None:  # a restored trial: decide its resources again
            try:
                trial.resources = resolve_resources(self.trainable, trial.config)
            except Exception as exc:
                self._errored(trial, error_outcome(exc) | {"config_error": True}, exc)
                return
        self._pending += 1
        task = asyncio.create_task(self._run_trial(trial), name=f"tune {trial.trial_name}")
        self._tasks[task] = trial
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            logger.error("tune: the task of a trial failed", exc_info=task.exception())
        self._notify()

    # ------------------------------------------------------------------ one trial

    async def _run_trial(self, trial: Trial) -> None:
        assert trial.resources is not None
        max_failures = self.failure.max_failures
        if trial.group is not None:  # resized: its driver goes into the group we hold
            placed: dict[str, Any] = {
                "placement": trial.group.bundle(0), **bundle_options(trial.resources.bundles[0])
            }
        else:
            placed = {
                "placement_group": trial.resources.bundles,
                "strategy": trial.resources.strategy,
            }
        try:
            ref = await TrialDriverActor.options(
                process=True,
                **placed,
                max_restarts=-1 if max_failures < 0 else max_failures,
                # The default name (unique per runtime): trial_name_creator may repeat names.
                name=f"{trainable_name(self.trainable)}_{trial.trial_id}",
            ).spawn(self.trainable, self.bus)
        except Exception as exc:  # infeasible resources, a trainable that does not travel
            if isinstance(exc, actorrt.InfeasibleResourceError):
                exc = self._request_error(trial, exc)
            await self._drop_group(trial)
            self._errored(trial, error_outcome(exc), exc)
            return
        finally:
            self._pending -= 1
            self._notify()
        self._refs[trial.trial_id] = ref
        ended = False
        try:
            trial.status = RUNNING
            self.progress.trial_status(trial)
            self.callbacks.trial_start(self.trials, trial)
            await self._attempts(trial, ref)
            ended = True
        finally:
            self._refs.pop(trial.trial_id, None)
            if trial.status == RUNNING and not self._aborted:
                self._complete(trial)  # cancelled mid-run: the experiment is stopping
            # A trial that ended returns its worker to the pool; one cut off is killed.
            await (ref.stop() if ended else ref.kill())
            if not (ended and trial.resizing):
                await self._drop_group(trial)
                await self._drop_resize(trial)
        if trial.resizing:
            await self._swap_group(trial)
            return
        if trial.resume_after_stop and not self._stopping:
            trial.resume_after_stop = False  # resumed while its paused actor wound down
            self._submit(trial)

    async def _attempts(self, trial: Trial, ref: Any) -> None:
        while True:
            try:
                spec = self._spec(trial)
                if spec.get("checkpoint"):
                    self.callbacks.trial_restore(self.trials, trial)
                outcome: dict[str, Any] = await ref.run(spec)
            except actorrt.ActorDiedError as exc:
                outcome = {"status": "stopped"} if trial.should_stop else error_outcome(exc)
                outcome["exception"] = exc
            if trial.pausing:  # paused at its report (see on_result): its actor stops
                trial.pausing = False  # (it may be resumed already: status PENDING)
                return
            if trial.resizing:  # it restarts in its new group (_swap_group)
                return
            if outcome["status"] != "error":
                if trial.restart_with is not None and not (self._stopping or trial.should_stop):
                    await self._restart(trial)
                    continue
                self._complete(trial)
                return
            error = outcome.get("exception") or load_error(outcome)
            trial.num_failures += 1
            limit = self.failure.max_failures
            if (
                outcome.get("config_error")
                or self._stopping
                or (limit >= 0 and trial.num_failures > limit)
            ):
                self._errored(trial, outcome, error)
                return
            where = trial.checkpoint or "the start"
            self.progress.trial_status(
                trial, f"failed ({outcome['error_type']}); retry {trial.num_failures} from {where}"
            )
            self.callbacks.trial_recover(self.trials, trial)

    def _take_donor_checkpoint(self, trial: Trial) -> None:
        """PBT's exploit, at the decision: copy the donor's latest checkpoint into this
        trial's folder now, while it exists (the donor may delete it at its next report).
        Files are hard-linked where possible (checkpoints are never modified in place), so
        this costs next to nothing on the driver's loop."""
        assert trial.restart_with is not None
        config, (source, score, iteration, time_total) = trial.restart_with
        dest = os.path.join(trial.path, f"checkpoint_{trial.checkpoint_count:06d}")
        copy_dir_atomic(source, dest, link=True)  # recorded in the journal by _restart
        trial.checkpoint_count += 1
        trial.restart_with = (config, (dest, score, iteration, time_total))

    async def _restart(self, trial: Trial) -> None:
        """Start the next attempt of a trial a scheduler restarted (PBT): its new config,
        from the checkpoint taken from the donor."""
        assert trial.restart_with is not None
        config, record = trial.restart_with
        trial.restart_with = None
        trial.checkpoints.append(record)
        trial.config = config
        self.storage.write_params(trial.path, config)
        self.record.restart(trial, record)
        self.progress.trial_status(trial, f"restarts from {record[0]} with {config}")

    def _spec(self, trial: Trial) -> dict[str, Any]:
        assert trial.resources is not None
        spec = {
            "trial_id": trial.trial_id,
            "trial_name": trial.trial_name,
            "experiment_name": self.name,
            "trial_dir": trial.path,
            "config": trial.config,
            "bundles": trial.resources.bundles,
            "strategy": trial.resources.strategy,
            "checkpoint_frequency": self.checkpoint_config.checkpoint_frequency,
            "checkpoint_at_end": self.checkpoint_config.checkpoint_at_end,
            "checkpoint_count": trial.checkpoint_count,
            "chdir": self._chdir,
        }
        spec.update(trial.restore_spec())
        spec["resized"], trial.resized = trial.resized, False
        return spec

    def _complete(self, trial: Trial) -> None:
        trial.status = TERMINATED
        if trial.last_result:
            trial.last_result["done"] = True
        self.scheduler.on_trial_complete(self, trial, trial.last_result)
        self.searcher.on_trial_complete(trial.trial_id, trial.last_result, error=False)
        self.storage.close_trial(trial.path)
        self.record.end(trial, self.searcher)
        self.progress.trial_status(trial)
        self.callbacks.trial_complete(self.trials, trial)
        self._notify()

    def _request_error(
        self, trial: Trial, exc: actorrt.InfeasibleResourceError
    ) -> actorrt.InfeasibleResourceError:
        """The broker's error about a trial's reservation, saying which trial it is and
        what made its request that size."""
        assert trial.resources is not None
        wrapped = actorrt.InfeasibleResourceError(
            f"trial {trial.trial_name} cannot start: it reserves "
            f"{trial.resources.bundles} ({trial.resources.strategy}), from "
            f"{describe_request(self.trainable, trial.config)}. {exc}"
        )
        wrapped.__cause__ = exc
        wrapped.__suppress_context__ = True
        return wrapped

    def _errored(
        self, trial: Trial, outcome: dict[str, Any], error: BaseException | None
    ) -> None:
        trial.status = ERROR
        trial.error_text = outcome.get("error_text", "")
        trial.config_error = bool(outcome.get("config_error"))
        if error is None:
            error = actorrt.ActorrtError(f"trial {trial.trial_id} failed: {outcome['error_type']}")
        if trial.error_text and not getattr(error, "__notes__", None):
            error.add_note(f"trial {trial.trial_name}: {trial.error_text.rstrip()}")
        trial.error = error
        self.scheduler.on_trial_error(self, trial)
        self.searcher.on_trial_complete(trial.trial_id, trial.last_result, error=True)
        self.storage.close_trial(trial.path)
        with open(os.path.join(trial.path, "error.txt"), "w", encoding="utf-8") as f:
            f.write(trial.error_text or repr(error))
        self.record.end(trial, self.searcher)
        self.progress.trial_status(trial, f"{type(error).__name__}: {error}")
        self.callbacks.trial_error(self.trials, trial)
        if self.failure.fail_fast:
            self.stop_all("fail_fast")
        self._notify()

    # ------------------------------------------------------------ called by the bus

    def on_result(self, trial_id: str, result: dict[str, Any], checkpoint: str | None) -> str:
        """A trial's report: record it, and decide whether the trial goes on."""
        trial = self._by_id.get(trial_id)
        if trial is None or trial.status != RUNNING:
            return STOP
        result["trial_id"] = trial_id
        result["date"] = time.strftime("%Y-%m-%d_%H-%M-%S")
        result["hostname"] = self._hostname
        # A trial that reports done=True has finished, as in Ray.
        reported_done = bool(result.get("done", False))
        result["done"] = reported_done
        trial.pid = result.get("pid")
        if self._fatal is not None:
            return STOP  # the experiment is ending
        try:
            self.checks.check(trial.trial_name, result)
        except (TypeError, ValueError) as exc:
            self._fail(exc)
            return STOP
        if checkpoint is not None:
            result["checkpoint_dir_name"] = os.path.basename(checkpoint)
        trial.last_result = result
        trial.num_results += 1
        self.storage.append_result(trial.path, {**result, "config": trial.config})
        if checkpoint is not None:  # recorded after its result, so a resume keeps that result
            self._add_checkpoint(trial, checkpoint, result)
        # The scheduler first, as in Ray: it may add to the result (HyperBandForBOHB's
        # hyperband_info) what the searcher reads. What either raises ends the experiment.
        try:
            decision = self.scheduler.on_trial_result(self, trial, result)
            self.searcher.on_trial_result(trial_id, result)
        except Exception as exc:
            self._fail(exc)
            return STOP
        if decision == TrialScheduler.PAUSE and trial.restart_with is not None:
            self._take_donor_checkpoint(trial)
            decision = STOP  # this attempt ends here; _attempts starts the next (PBT)
        if self.stopper(trial_id, result) or reported_done:
            decision = STOP
        if self.stopper.stop_all():
            self.stop_all("stopper")
        if trial.should_stop:
            decision = STOP
        if decision == TrialScheduler.PAUSE:
            self._pause(trial, checkpoint is not None)
            decision = STOP  # this attempt ends here; resume_trial starts the next
        if trial.resize is not None:
            if decision == STOP:  # it ends here anyway: the new group is not needed
                self._forget(self._drop_resize(trial))
            else:
                # A class trainable is saved now, as Ray saves one it pauses.
                save = checkpoint is None and isinstance(self.trainable, type) and issubclass(
                    self.trainable, Trainable
                )
                self._begin_resize(trial, checkpoint is not None or save)
                decision = SAVE_AND_STOP if save else STOP  # _swap_group starts the next
        self.callbacks.trial_result(self.trials, trial, result)
        self.progress.result(trial, result)
        if checkpoint is not None:
            self.callbacks.checkpoint(self.trials, trial, Checkpoint(checkpoint))
        if self._fatal is not None:
            return STOP
        if decision == SAVE_AND_STOP:
            return SAVE_AND_STOP
        return STOP if decision == STOP else CONTINUE

    def on_checkpoint(self, trial_id: str, path: str) -> None:
        trial = self._by_id.get(trial_id)
        if trial is not None:
            self._add_checkpoint(trial, path, trial.last_result)
            self.callbacks.checkpoint(self.trials, trial, Checkpoint(path))

    # ------------------------------------------------------- the experiment's state

    def _resume(self) -> None:
        """Take the restored experiment's trials back (see ``_restore``) and start those
        that run again."""
        assert self.restored is not None
        rebuilt = rebuild_trials(self.restored, self.storage)
        if isinstance(self.scheduler, ResourceChangingScheduler):
            logger.warning(
                "tune: ResourceChangingScheduler: restored trials start again with their "
                "base resources (the resources they had grown to are not saved); the "
                "allocation function resizes them again from their next results"
            )
        self.trials.extend(rebuilt.trials)
        self._by_id.update((t.trial_id, t) for t in rebuilt.trials)
        self._replaying = True  # the scheduler's stop/resume calls change nothing now
        try:
            replay_scheduler(self.scheduler, self, rebuilt.trials)
        finally:
            self._replaying = False
        restore_searcher(self.searcher, self.restored, rebuilt.trials, rebuilt.to_run)
        for trial in rebuilt.closed:  # resume_unfinished=False: they end here, for good
            self.searcher.on_trial_complete(trial.trial_id, trial.last_result, error=False)
            self.record.end(trial, self.searcher)
        for trial in rebuilt.to_run:
            where = os.path.basename(trial.checkpoint) if trial.checkpoint else "the start"
            self.progress.trial_status(trial, f"resumes from {where}")
            self._submit(trial)

    def _print_resume_hint(self) -> None:
        path = self.storage.path
        logger.info("tune: experiment %s stopped early (%s)", path, self.stop_reason)
        if self.run_config.verbose >= 1:
            name = trainable_name(self.trainable)
            print(
                f"[tune] the experiment stopped early ({self.stop_reason}); its state is saved "
                f"in {path}\n[tune] to resume it: "
                f"tune.Tuner.restore({json.dumps(path)}, trainable={name}).fit()",
                file=sys.stderr,
                flush=True,
            )

    def _add_checkpoint(self, trial: Trial, path: str, result: dict[str, Any]) -> None:
        record = trial.record_checkpoint(path, result, self.checkpoint_config)
        self.record.checkpoint(trial, record)
        trial.prune_checkpoints(self.checkpoint_config)  # after the journal has the new one

    # ------------------------------------------------------- paused trials (HyperBand)

    def _pause(self, trial: Trial, checkpointed: bool) -> None:
        """A scheduler paused the trial at this report: its attempt ends, its actor stops
        and gives its resources back; :meth:`resume_trial` starts it again from its latest
        checkpoint."""
        trial.status = PAUSED
        trial.pausing = True
        if not checkpointed and not self._warned_pause:
            self._warned_pause = True
            logger.warning(
                "tune: trial %s was paused at a result without a checkpoint: it will resume "
                "from %s and repeat the iterations since; report a checkpoint with every "
                "result when a scheduler pauses trials (HyperBand)",
                trial.trial_name, trial.checkpoint or "the start",
            )
        self.progress.trial_status(trial, "paused")
        self._notify()

    def _has_task(self, trial: Trial) -> bool:
        """Whether the trial's task has yet to pass its resume check (a done task may
        still be listed: its done-callback has not run)."""
        return any(t is trial and not task.done() for task, t in self._tasks.items())

    def resume_trial(self, trial: Trial) -> None:
        """Start a paused trial again (from its latest checkpoint), when its resources are
        free; for schedulers (Ray's unpause)."""
        if trial.status != PAUSED or self._stopping or self._replaying:
            return
        trial.status = PENDING
        if self._has_task(trial):
            trial.resume_after_stop = True  # its paused actor is still stopping
        else:
            self._submit(trial)
        self._notify()

    def stop_trial(self, trial: Trial) -> None:
        """End a trial for good, as TERMINATED (for schedulers, as Ray's ``stop_trial``): a
        paused one now, a running one at its next report."""
        if self._replaying:
            return
        if trial.status == PAUSED:
            trial.resume_after_stop = False
            self._complete(trial)
        elif trial.status in (RUNNING, PENDING):
            trial.should_stop = True

    def _resume_stranded(self) -> None:
        """Nothing runs or waits, yet trials are paused: let the scheduler decide (HyperBand
        halves what it has), then resume whatever is still paused, so nothing hangs."""
        if not any(t.status == PAUSED for t in self.trials):
            return
        decide = getattr(self.scheduler, "on_no_running_trials", None)
        if decide is not None:
            decide(self)
        if self._tasks:
            return
        paused = [t for t in self.trials if t.status == PAUSED]
        if paused:
            logger.warning(
                "tune: nothing runs and %d trial(s) are paused that the scheduler did not "
                "resume (%s); resuming them so the experiment can finish",
                len(paused), ", ".join(t.trial_name for t in paused[:5]),
            )
            for trial in paused:
                self.resume_trial(trial)

    # ------------------------------------------- changing resources (ResourceChanging)

    def get_live_trials(self) -> list[Trial]:
        """Trials that have not ended (Ray's ``get_live_trials``)."""
        return [t for t in self.trials if t.status not in (TERMINATED, ERROR)]

    def cluster_resources(self) -> dict[str, float]:
        """Everything the cluster has (what allocation functions share out)."""
        return actorrt.cluster_resources()

    @property
    def _resource_updater(self) -> ClusterTotals:
        """Ray's controller attribute that allocation functions read totals from
        (``get_num_cpus()``, ``get_num_gpus()``)."""
        return ClusterTotals()

    def resize_trial(self, trial: Trial, resources: PlacementGroupFactory) -> bool:
        """Ask for ``resources`` for a running trial, without waiting (see ``_resize``):
        ``True`` when it restarts with them from this result's checkpoint; ``False`` when
        it keeps running as it is (the reason is logged at INFO)."""
        if (
            self._replaying or self._stopping or trial.status != RUNNING or trial.should_stop
            or trial.restart_with is not None or trial.resize is not None
            or trial.resources is None or resources == trial.resources
        ):
            return False
        group = try_reserve(trial, resources, self._pending)
        if group is None:
            return False
        trial.resize = (resources, group)
        return True

    def _begin_resize(self, trial: Trial, checkpointed: bool) -> None:
        assert trial.resize is not None and trial.resources is not None
        trial.resizing = True
        trial.status = PENDING
        if not checkpointed:
            logger.warning(
                "tune: trial %s changes resources at a result without a checkpoint: it "
                "restarts from %s and repeats the iterations since; report a checkpoint "
                "with every result under ResourceChangingScheduler",
                trial.trial_name, trial.checkpoint or "the start",
            )
        self.progress.trial_status(
            trial, f"resources {trial.resources.bundles} -> {trial.resize[0].bundles}"
        )
        self._notify()

    async def _swap_group(self, trial: Trial) -> None:
        """The resized trial's old actor has stopped: give back the group we held for it
        (if any), take the new one, and start its next attempt there."""
        assert trial.resize is not None
        new, group = trial.resize
        trial.resize = None
        trial.resizing = False
        try:
            await self._drop_group(trial)
            if self._stopping:
                await group.remove()
                trial.status = RUNNING
                self._complete(trial)
                return
            if await await_group(trial, group, new):
                trial.resources = new
                trial.group = group
                trial.resized = True  # a class trainable's update_resources() is called
                logger.info("tune: trial %s now has %s", trial.trial_name, new.bundles)
        except BaseException:
            trial.status = RUNNING
            raise
        self._submit(trial)

    async def _drop_group(self, trial: Trial) -> None:
        group, trial.group = trial.group, None
        if group is not None:
            await group.remove()

    async def _drop_resize(self, trial: Trial) -> None:
        resize, trial.resize = trial.resize, None
        trial.resizing = False
        if resize is not None:
            await resize[1].remove()

    def _forget(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._kills.add(task)
        task.add_done_callback(self._kills.discard)

    # ------------------------------------------------------------------ stopping

    def stop_all(self, why: str) -> None:
        """Stop the experiment: no new trials; waiting ones are withdrawn; running ones are
        told to stop at their next report, and killed if they do not within a grace."""
        if self._stopping:
            return
        self._stopping = True
        self.progress.note(f"stopping the experiment: {why}")
        for task, trial in list(self._tasks.items()):
            if trial.status == PENDING and not trial.resizing:
                task.cancel()
            else:
                trial.should_stop = True
        asyncio.get_running_loop().call_later(STOP_GRACE_S, self._kill_running)
        self._notify()

    def _kill_running(self) -> None:
        for trial_id, ref in list(self._refs.items()):
            trial = self._by_id[trial_id]
            if trial.status == RUNNING and trial.should_stop:
                kill = asyncio.ensure_future(ref.kill())
                self._kills.add(kill)
                kill.add_done_callback(self._kills.discard)

    # ------------------------------------------------------------------ results

    def result_grid(self) -> ResultGrid:
        return grid_of(
            self.trials, self.storage.path, self.tune_config.metric, self.tune_config.mode
        )
