"""The controller: makes trials, runs each as a trial-driver actor, and collects results.

It runs on the runtime's event loop, in the driver process. Each trial is one asyncio task
that spawns the trial's driver actor with the trial's factory as its own placement group
(``placement_group=bundles``, ``process=True``): the broker, not the controller, decides
when a trial's resources are free, so parallelism is exactly what the resources allow, and
a trial's declared workers are reserved atomically with it. Results come back through an
inline report-bus actor: each ``tune.report`` is one ask whose answer is the scheduler's
decision.

Everything ``Tuner.restore`` needs is written as it happens (:mod:`._experiment_state`): a
header when a new experiment starts, then one journal line per trial created, checkpoint
recorded, config changed and trial ended, and the searcher's state when it changes. A run
that is cancelled or fails (Ctrl-C, SIGTERM) leaves the trials it cut off unfinished in the
journal, and prints how to resume.

The controller is built up in layers, each a subclass of the one below, each calling only
down: :mod:`._controller_state` (what a run holds; ending trials; stopping),
:mod:`._trial_launch` (starting trials, their attempts and retries),
:mod:`._scheduler_actions` (pause, resume, stop and resize, for schedulers),
:mod:`._result_handling` (each report and its decision), and this module, the
experiment's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import sys

from .._worker._workdir import chdir_enabled
from ..result_grid import ResultGrid
from ..schedulers.resource_changing_scheduler import ResourceChangingScheduler
from ._bus import ReportBusActor
from ._dashboard import LiveSweep
from ._prepare import trainable_name
from ._restore import rebuild_trials, replay_scheduler, restore_searcher
from ._result_checks import flat_view
from ._result_handling import ResultHandler

__all__ = ["TuneController"]

logger = logging.getLogger("actorrt.tune")

STOPPER_CHECK_S = 1.0  # how often a stopper's stop_all() is asked between results
STEP_S = 0.1  # the longest step of the controller (callbacks' on_step_begin/on_step_end)


class TuneController(ResultHandler):
    """Runs one experiment to its end; see the module docstring.

    With ``restored`` (what ``Tuner.restore`` read), it continues that experiment in its
    folder instead of starting a new one.
    """

    # ---------------------------------------------------------- the loop

    async def run(self) -> ResultGrid:
        """Run every trial to its end and return the results."""
        loop = asyncio.get_running_loop()
        # The time budget counts from here: the callbacks' preparation and setup below (the
        # TensorBoard writer imports tensorboardX and torch: seconds on a loaded machine) are
        # the experiment's time too.
        begun = loop.time()
        self._changed = asyncio.Event()
        max_pending = self._max_pending()
        self._chdir = chdir_enabled()
        # Trials start from the bus's report handling too: their tasks run in the context of
        # this run, not of the bus actor, so a trial's driver is never the bus's child and
        # the run's waits on trials are never taken for the bus's own.
        self._context = contextvars.copy_context()
        self.bus = await ReportBusActor.options(process=False).spawn(self)
        sweep = LiveSweep(self)
        timers: list[asyncio.TimerHandle] = []
        status_task: asyncio.Task[None] | None = None
        stopper_task: asyncio.Task[None] | None = None
        try:
            self.record.open(metric=self.tune_config.metric, mode=self.tune_config.mode)
            opened = loop.time()
            if self.tune_config.time_budget_s is not None:
                # The budget counts the experiment's time over all its runs (restores): what
                # the record holds of earlier runs, and this run's from its start. Armed
                # before the callbacks are prepared, which may take long: it stops the
                # experiment then too.
                earlier = self.record.elapsed() - (loop.time() - opened)
                left = self.tune_config.time_budget_s - earlier - (loop.time() - begun)
                timers.append(loop.call_later(max(left, 0.0), self.stop_all, "time budget"))
            self._preparing = asyncio.ensure_future(self.callbacks.prepare())
            try:
                await asyncio.wait([self._preparing])
            finally:
                self._preparing.cancel()  # this task was cancelled: so is the preparation
            if not self._preparing.cancelled():
                self._preparing.result()
                self.callbacks.setup(self.stopper, self.tune_config.num_samples, self.searcher)
            self._preparing = None
            if self.restored is not None:
                self._resume()
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
            if self.storage.error is not None:  # writing the last results failed
                self._fail(self.storage.error)
            closed = self.record.close(interrupted=self.stop_reason if self._aborted else None)
            if self._aborted and closed and self._resumable:
                self._print_resume_hint()
            elif self._aborted and self.run_config.verbose >= 1:
                print(f"[tune] the experiment ended: {self.stop_reason}", file=sys.stderr,
                      flush=True)
            sweep.ended()
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

    async def _status_loop(self) -> None:
        await self.progress.watch(self.trials, self._refs)

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # ----------------------------------------------------------- restore

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
            self.searcher.on_trial_complete(
                trial.trial_id, result=flat_view(trial.last_result), error=False
            )
            self.record.end(trial, self.searcher)
        for trial in rebuilt.to_run:
            where = os.path.basename(trial.checkpoint_path or "") or "the start"
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
