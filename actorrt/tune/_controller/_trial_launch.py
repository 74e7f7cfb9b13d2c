"""Launching trials and running them to their end, retrying failures.

A trial starts from the searcher's config (:meth:`TrialLauncher._launch`), as one asyncio
task (:meth:`TrialLauncher._run_trial`) that spawns the trial's driver actor with the
trial's factory as its own placement group (``placement_group=bundles``, ``process=True``):
the broker, not the controller, decides when a trial's resources are free. The task then
runs the trial's attempts: a failed attempt is retried from the latest checkpoint while
``FailureConfig(max_failures)`` allows (by the same actor after an error it raised or its
process died; by a new actor in a new group after anything else ended it, also while it
started); a trial that a scheduler restarted (PBT) starts its next attempt with its new
config; a resized one starts again in its new group.

Up to ``max_pending`` trials wait for resources at a time (Ray's pending-trial limit): enough
to fill the cluster as soon as anything frees, without drawing every sample up front.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Callable
from typing import Any

import actorrt

from .._worker._checkpoint_dirs import copy_checkpoint, next_checkpoint_index
from .._worker._spec import Ended, Outcome, TrialSpec, error_outcome
from ..experiment._lifecycle import AttemptEnd
from ..experiment.trial import PENDING, RUNNING, Trial
from ..search._by_hand import merge_constants
from ..search.basic_variant import BasicVariantGenerator
from ..search.concurrency_limiter import ConcurrencyLimiter
from ..search.searcher import Searcher
from ..search.variant_generator import in_space_order
from ..trainable._resources import describe_request, resolve_resources
from ._bus import TrialDriverActor
from ._controller_state import ControllerState
from ._prepare import trainable_name
from ._resize import await_group, bundle_options

__all__ = ["MAX_PENDING_ENV", "TrialLauncher"]

logger = logging.getLogger("actorrt.tune")

MAX_PENDING_ENV = "ACTORRT_TUNE_MAX_PENDING_TRIALS"


class TrialLauncher(ControllerState):
    """Starts trials and runs each to its end (see the module docstring)."""

    def _max_pending(self) -> int:
        if os.environ.get(MAX_PENDING_ENV):
            return max(1, int(os.environ[MAX_PENDING_ENV]))
        inner = self.searcher.searcher if isinstance(self.searcher, ConcurrencyLimiter) else None
        if not isinstance(inner or self.searcher, BasicVariantGenerator):
            return 1  # an adaptive searcher learns from results: suggest late
        cpus = actorrt.cluster_resources().get("CPU", 1.0)
        return max(16, math.ceil(cpus * 1.1))

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
            # As Ray: a suggestion goes over the param space's constants.
            self._start(trial_id, merge_constants(self.param_space, config))

    def _user_name(self, option: str, creator: Callable[[Trial], Any], trial: Trial) -> str:
        """What ``TuneConfig(option=creator)`` names ``trial``; what it raises ends the
        experiment, saying so, with no resume hint (a resumed run would call it again)."""
        try:
            return str(creator(trial))
        except Exception as exc:
            exc.add_note(
                f"raised by TuneConfig({option}={getattr(creator, '__name__', creator)}) "
                f"for trial {trial.trial_id} (config {trial.config}); the experiment ends"
            )
            self._resumable = False
            self._fail(exc)
            raise

    def _start(self, trial_id: str, config: dict[str, Any]) -> None:
        config = in_space_order(config, self.param_space)
        trial = Trial(trainable_name(self.trainable), config=config, trial_id=trial_id)
        creator = self.tune_config.trial_name_creator
        if creator is not None:
            trial.trial_name = self._user_name("trial_name_creator", creator, trial)
        dirname = self.tune_config.trial_dirname_creator
        trial.path = self.storage.new_trial_dir(
            self._user_name("trial_dirname_creator", dirname, trial) if dirname
            else trial.trial_name,
            config,
        )
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
            self._errored(trial, error_outcome(failure, config_error=True), failure)
            return
        self._submit(trial)

    def _submit(self, trial: Trial) -> None:
        """Start a trial's task: it waits for the trial's resources, then runs it."""
        if trial.resources is None:  # a restored trial: decide its resources again
            try:
                trial.resources = resolve_resources(self.trainable, trial.config)
            except Exception as exc:
                self._errored(trial, error_outcome(exc, config_error=True), exc)
                return
        self._pending += 1
        task = asyncio.create_task(
            self._run_trial(trial), name=f"tune {trial.trial_name}", context=self._context
        )
        self._tasks[task] = trial
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            logger.error("tune: the task of a trial failed", exc_info=error)
            self._fail(error)  # the experiment ends with it, rather than without that trial
        self._notify()

    # --------------------------------------------------------- one trial

    async def _run_trial(self, trial: Trial) -> None:
        assert trial.resources is not None
        max_failures = self.failure.max_failures
        if trial.group is not None:  # resized: its driver goes into the group we hold
            placed: dict[str, Any] = {
                "placement": trial.group.bundle(0),
                **bundle_options(trial.resources.group_bundles[0]),
            }
        else:
            placed = {
                "placement_group": trial.resources.group_bundles,
                "strategy": trial.resources.strategy,
            }
        try:
            ref = await TrialDriverActor.options(
                process=True,
                **placed,
                # Its process dying (SIGKILL, OOM) restarts it in place, in its group.
                max_restarts=-1 if max_failures < 0 else max_failures,
                # The default name (unique per runtime): trial_name_creator may repeat names.
                name=f"{trainable_name(self.trainable)}_{trial.trial_id}",
            ).spawn(self.shipped_trainable, self.bus)
        except Exception as exc:  # infeasible resources, a trainable that does not travel
            if isinstance(exc, actorrt.InfeasibleResourceError):
                exc = self._request_error(trial, exc)
            await self._drop_group(trial)
            if self._start_retried(trial, exc):
                self._submit(trial)
            else:
                self._errored(trial, error_outcome(exc), exc)
            return
        finally:
            self._pending -= 1
            self._notify()
        self._refs[trial.trial_id] = ref
        ended = False
        try:
            # Its folder, made on a storage thread meanwhile: awaited only now, so trials
            # still ask for their resources in the order they were created.
            try:
                await self.storage.ready(trial.path)
            except Exception as exc:  # as when the folder is made on the loop: the run fails
                self._fail(exc)
                return
            trial.set_status(RUNNING)
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
            if not (ended and trial.ending is AttemptEnd.RESIZE):
                await self._drop_group(trial)
                await self._drop_resize(trial)
        # Read only now: a paused trial may have been resumed while its actor wound down.
        ending, trial.ending = trial.ending, None
        if ending is AttemptEnd.RESIZE:
            await self._swap_group(trial)
        elif ending is AttemptEnd.RELAUNCH and not self._stopping:
            self._submit(trial)

    async def _attempts(self, trial: Trial, ref: Any) -> None:
        while True:
            elsewhere = False
            try:
                spec = self._spec(trial)
                if spec.checkpoint:
                    self.callbacks.trial_restore(self.trials, trial)
                outcome: Outcome = await ref.run(spec)
            except actorrt.ActorDiedError as exc:
                outcome = Outcome(Ended.STOPPED) if trial.stop_asked else error_outcome(exc)
                outcome.exception = exc
                # A dead process: the core restarts the actor in a new one, keeping its
                # group, and the next call waits for it. Anything else that ended it (its
                # node lost with its group, a kill) leaves it failing every call: the next
                # attempt needs a new actor in a new group, wherever the broker finds room.
                elsewhere = exc.reason != actorrt.DeathReason.PROCESS_DIED
            if trial.ending is not None:  # paused or resized at its report (see on_result):
                return  # its actor stops; _run_trial does what the end leads to
            if outcome.ended is not Ended.ERROR:
                if trial.restart_with is not None and not (self._stopping or trial.stop_asked):
                    await self._restart(trial)
                    continue
                self._complete(trial)
                return
            error = outcome.load_error()
            trial.num_failures += 1
            limit = self.failure.max_failures
            if (
                outcome.config_error
                or self._stopping
                or (limit >= 0 and trial.num_failures > limit)
            ):
                self._errored(trial, outcome, error)
                return
            where = trial.checkpoint_path or "the start"
            self.progress.trial_status(
                trial, f"failed ({outcome.error_type}); retry {trial.num_failures} from {where}"
            )
            self.callbacks.trial_recover(self.trials, trial)
            if elsewhere:
                trial.set_status(PENDING)
                trial.ending = AttemptEnd.RELAUNCH  # submitted again once this actor is gone
                return

    def _start_retried(self, trial: Trial, exc: Exception) -> bool:
        """Whether a trial whose actor ended while it started (its node lost, its process
        dead, its group removed, killed) counts that as a failure and tries again. A
        constructor that crashed would crash again; a runtime going away ends the run."""
        if not isinstance(exc, actorrt.ActorDiedError) or self._stopping or exc.reason in (
            actorrt.DeathReason.CRASHED,
            actorrt.DeathReason.RUNTIME_SHUT_DOWN,
            actorrt.DeathReason.PARENT_ENDED,
        ):
            return False
        trial.num_failures += 1
        limit = self.failure.max_failures
        if limit >= 0 and trial.num_failures > limit:
            return False
        self.progress.trial_status(
            trial, f"its actor ended while starting ({exc.reason}); retry {trial.num_failures}"
        )
        return True

    def _request_error(
        self, trial: Trial, exc: actorrt.InfeasibleResourceError
    ) -> actorrt.InfeasibleResourceError:
        """The broker's error about a trial's reservation, saying which trial it is and
        what made its request that size."""
        assert trial.resources is not None
        wrapped = actorrt.InfeasibleResourceError(
            f"trial {trial.trial_name} cannot start: it reserves "
            f"{trial.resources.group_bundles} ({trial.resources.strategy}), from "
            f"{describe_request(self.trainable, trial.config)}. {exc}"
        )
        wrapped.__cause__ = exc
        wrapped.__suppress_context__ = True
        return wrapped

    # ---------------------------------------------------- restarts (PBT)

    def _take_donor_checkpoint(self, trial: Trial) -> None:
        """PBT's exploit, at the decision: copy the donor's latest checkpoint into this
        trial's folder now, while it exists (the donor may delete it at its next report).
        Files are hard-linked where possible (checkpoints are never modified in place), so
        this costs next to nothing on the driver's loop."""
        assert trial.restart_with is not None
        config, record = trial.restart_with
        # Recorded in the journal by _restart.
        dest, index = copy_checkpoint(record.path, trial.path, trial.checkpoint_count, link=True)
        trial.checkpoint_count = index + 1
        trial.restart_with = (config, record._replace(path=dest))

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
        self.progress.trial_status(trial, f"restarts from {record.path} with {config}")

    # -------------------------------------------------------- an attempt

    def _spec(self, trial: Trial) -> TrialSpec:
        assert trial.resources is not None
        latest = trial.checkpoints[-1] if trial.checkpoints else None
        resized, trial.resized = trial.resized, False
        trial.answered_stop = False  # a new attempt
        return TrialSpec(
            trial_id=trial.trial_id,
            trial_name=trial.trial_name,
            experiment_name=self.name,
            trial_dir=trial.path,
            config=trial.config,
            bundles=trial.resources.group_bundles,
            strategy=trial.resources.strategy,
            checkpoint_frequency=int(self.checkpoint_config.checkpoint_frequency or 0),
            checkpoint_at_end=bool(self.checkpoint_config.checkpoint_at_end),
            checkpoint_count=self._checkpoint_start(trial),
            chdir=self._chdir,
            # Where it resumes: the latest checkpoint, at its iteration.
            checkpoint=latest.path if latest else None,
            iteration=latest.iteration if latest else 0,
            time_total_s=latest.time_total_s if latest else 0.0,
            resized=resized,
            reports_ahead=self.reports_ahead,
        )

    def _checkpoint_start(self, trial: Trial) -> int:
        """The first checkpoint index of the attempt about to start. A later attempt of
        the trial first clears what an earlier one left in its folder without reporting
        it (a process killed between saving a checkpoint and reporting it): the new
        attempt owns the index (see :mod:`._checkpoint_dirs`)."""
        if trial.attempts:
            trial.checkpoint_count = next_checkpoint_index(
                trial.path, trial.checkpoint_count, reported={c.path for c in trial.checkpoints}
            )
        trial.attempts += 1
        return trial.checkpoint_count

    # ------------------------------------ a new group (ResourceChanging)

    async def _swap_group(self, trial: Trial) -> None:
        """The resized trial's old actor has stopped: give back the group we held for it
        (if any), take the new one, and start its next attempt there."""
        assert trial.resize is not None
        new, group = trial.resize
        trial.resize = None
        try:
            await self._drop_group(trial)
            if self._stopping:
                await group.remove()
                trial.set_status(RUNNING)
                self._complete(trial)
                return
            if await await_group(trial, group, new):
                trial.resources = new
                trial.group = group
                trial.resized = True  # a class trainable's update_resources() is called
                logger.info("tune: trial %s now has %s", trial.trial_name, new.group_bundles)
        except BaseException:
            trial.set_status(RUNNING)
            raise
        self._submit(trial)
