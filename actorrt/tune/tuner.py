"""``Tuner``: the entry point, from a plain script (``fit``) or async code (``fit_async``),
and ``Tuner.restore`` to continue an experiment that stopped early."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import os
import warnings
from collections.abc import Iterator
from typing import Any

import actorrt
from actorrt._notebook import CellView, in_kernel, must_await
from actorrt._sigterm import DEFAULT_GRACE, SIGTERM_EXIT_STATUS, OrderlySigterm

from .._shared._deprecation import RayDeprecationWarning, warn_migration
from .._shared._storage_path import check_local_storage_path
from ._controller._controller import TuneController
from ._controller._prepare import check_picklable, prepare_experiment, trainable_name
from ._controller._progress import cell_view
from ._controller._restore import RestoredExperiment, ResumeOptions, can_restore, load_experiment
from .registry import resolve
from .result_grid import ResultGrid
from .trainable._resources import FROM_TRAINER_ATTR, is_function_trainable, with_resources
from .trainable.trainable import Trainable
from .tune_config import RunConfig, TuneConfig

__all__ = ["Tuner"]

class _Terminated(KeyboardInterrupt):
    """SIGTERM during ``Tuner.fit()``: handled as Ctrl-C is, then turned into ``SystemExit``."""


def _interrupt() -> None:
    raise _Terminated()


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[OrderlySigterm]:
    """While ``fit()`` runs, SIGTERM interrupts it as Ctrl-C does, bounded by the grace
    (actorrt's one SIGTERM mechanism: where it may take SIGTERM over, see there)."""
    orderly = OrderlySigterm(_interrupt, DEFAULT_GRACE, "Tuner.fit()")
    orderly.install()
    try:
        yield orderly
    finally:
        orderly.uninstall()


def _from_trainer(trainable: Any) -> Any:
    """A Train trainer (``Tuner(trainer)``, as in Ray) as a function trainable declared with
    its scaling config, so each trial's driver and workers are one gang; anything else as
    it is; a name given to ``tune.register_trainable``, as what it names. Recognised by its
    methods: this package does not import ``actorrt.train``."""
    trainable = resolve(trainable)
    if inspect.isclass(trainable):
        return trainable
    as_trainable = getattr(trainable, "as_trainable", None)
    trial_resources = getattr(trainable, "trial_resources", None)
    if callable(as_trainable) and callable(trial_resources):
        declared = with_resources(as_trainable(), trial_resources)
        setattr(declared, FROM_TRAINER_ATTR, True)
        return declared
    return trainable


def _tune_run_config(run_config: Any) -> RunConfig:
    """Tune's ``RunConfig`` from what a Ray script passes: Tune's own, or a Train
    ``RunConfig`` (Ray 2.7-2.40 spelling, with ``stop=``/``callbacks=``)."""
    if run_config is None:
        return RunConfig()
    if isinstance(run_config, RunConfig):
        return run_config
    settings = getattr(run_config, "tune_settings", None)
    if not callable(settings):
        raise ValueError(f"run_config must be a tune.RunConfig, got {run_config!r}")
    storage = run_config.storage_path
    with warnings.catch_warnings():  # the one warning is the Tuner's (about the RunConfig)
        warnings.simplefilter("ignore", RayDeprecationWarning)
        return RunConfig(
            name=run_config.name,
            storage_path=os.fspath(storage) if storage is not None else None,
            failure_config=run_config.failure_config,
            checkpoint_config=run_config.checkpoint_config,
            **settings(),
        )


def _template_scaling_config(param_space: dict[str, Any]) -> dict[str, Any]:
    """``param_space["scaling_config"]`` holding search values (``ScalingConfig(
    num_workers=tune.grid_search([1, 2]))``) as a dict of its fields, which the search
    resolves per trial and the trainer turns back into a ``ScalingConfig``, as in Ray."""
    scaling = param_space.get("scaling_config")
    search_values = getattr(scaling, "search_values", None)
    if callable(search_values) and search_values() and dataclasses.is_dataclass(scaling):
        param_space["scaling_config"] = {
            f.name: getattr(scaling, f.name) for f in dataclasses.fields(scaling)
        }
    return param_space


def _check_trainable(trainable: Any) -> None:
    if inspect.isclass(trainable) and issubclass(trainable, Trainable):
        return
    if is_function_trainable(trainable):
        _check_signature(trainable)
        return
    raise ValueError(
        "Tuner takes a function trainable (def train(config): ... tune.report(...)) or a "
        f"tune.Trainable subclass, got {type(trainable).__name__}: {trainable!r}"
    )


def _check_signature(trainable: Any) -> None:
    """Ray's rule: a function trainable is called with the config as its one positional
    argument; one that cannot be is a ``ValueError`` here, not a ``TypeError`` in every
    trial."""
    try:
        signature = inspect.signature(trainable)
    except (TypeError, ValueError):
        return  # nothing to read: let the call decide
    try:
        signature.bind({})
    except TypeError:
        raise ValueError(
            f"the function trainable {getattr(trainable, '__name__', trainable)!r} must take "
            f"the config as its one positional argument, as in Ray: def train(config); its "
            f"signature is {signature}. Pass other arguments with tune.with_parameters"
        ) from None


class Tuner:
    """Runs a hyperparameter sweep (Ray Tune's ``Tuner``).

    Args:
        trainable: a function ``train(config)`` that calls ``tune.report``, or a
            :class:`Trainable` subclass; optionally wrapped by ``tune.with_resources``. Or
            an ``actorrt.train`` trainer: each trial fits a copy, with the param space's
            ``"train_loop_config"`` dict merged into its own and its
            ``"scaling_config"`` (if given) in place of its own, reserved with its
            workers as one gang.
        param_space: the search space: a dict of values, domains (``tune.uniform``...) and
            ``tune.grid_search`` markers, nested as you like.
        tune_config: how to search: see :class:`TuneConfig`.
        run_config: where and how long: see :class:`RunConfig`.

    Raises:
        ValueError: ``trainable`` is neither kind, or ``param_space`` is not a dict.
        TypeError: ``trainable`` cannot be pickled, so it could not be sent to the trials'
            worker processes (it holds a lock, an open file, a socket...).

    As in Ray, constructing a Tuner creates the experiment's folder
    (``storage_path/name``) and writes the experiment's definition there, so
    :meth:`can_restore` is true from then on. An experiment keeps its state in its folder
    as it runs; one that stopped early (killed, Ctrl-C, SIGTERM, a crashed machine)
    continues with :meth:`restore`.
    """

    def __init__(
        self,
        trainable: Any,
        *,
        param_space: dict[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_config: RunConfig | None = None,
    ) -> None:
        self._init(trainable, param_space, tune_config, run_config)
        self._prepared: tuple[str, str] | None = prepare_experiment(
            self.trainable, self.param_space, self.tune_config, self.run_config
        )

    def _init(
        self,
        trainable: Any,
        param_space: dict[str, Any] | None,
        tune_config: TuneConfig | None,
        run_config: RunConfig | None,
    ) -> None:
        given = trainable
        trainable = _from_trainer(trainable)
        _check_trainable(trainable)
        check_picklable(trainable)
        if param_space is not None and not isinstance(param_space, dict):
            raise ValueError(
                "The `param_space` passed to the `Tuner` must be a dict. Got "
                f"'{type(param_space)}' instead: {param_space!r}"
            )
        if tune_config is not None and not isinstance(tune_config, TuneConfig):
            raise ValueError(f"tune_config must be a tune.TuneConfig, got {tune_config!r}")
        self.trainable = trainable
        self.param_space = _template_scaling_config(dict(param_space or {}))
        self.tune_config = tune_config or TuneConfig()
        if run_config is not None and not isinstance(run_config, RunConfig):
            warn_migration(
                f"tune.Tuner took a {type(run_config).__module__}.RunConfig: Ray 2.x's "
                "Tune takes ray.tune.RunConfig; please update your imports "
                "(`ray.train.RunConfig` -> `ray.tune.RunConfig`). actorrt takes Train's "
                "as Tune's, as Ray 2.7-2.40 did"
            )
        if run_config is None and given is not trainable:
            run_config = getattr(given, "run_config", None)  # a trainer's, as in Ray
        self.run_config = _tune_run_config(run_config)
        self._results: ResultGrid | None = None
        self._task: asyncio.Task[ResultGrid] | None = None
        self._controller: TuneController | None = None
        self._restored: RestoredExperiment | None = None
        self._restore_args: tuple[str, dict[str, Any] | None, ResumeOptions] | None = None
        self._prepared = None

    @classmethod
    def restore(
        cls,
        path: str | os.PathLike[str],
        trainable: Any,
        *,
        param_space: dict[str, Any] | None = None,
        resume_unfinished: bool = True,
        resume_errored: bool = False,
        restart_errored: bool = False,
    ) -> Tuner:
        """Continue an experiment that stopped early (Ray Tune's ``Tuner.restore``).

        ``fit()`` on the returned tuner finishes the experiment in its folder: trials that
        ended are kept with their results and not run again; unfinished ones resume from
        their latest checkpoint (``training_iteration`` continues from it, and the results
        they had reported after it are dropped from their files, since they are reported
        again); the search goes on where it stopped, so the experiment ends with as many
        trials as the original would have made. The ``TuneConfig`` and ``RunConfig`` are the
        experiment's own, read from its folder (which may have moved).

        Args:
            path: the experiment folder (``storage_path/name``, as printed when a run
                stops early, or ``ResultGrid.experiment_path``).
            trainable: the experiment's trainable, under the same name (it may be defined
                again, in a new script; ``with_resources`` may wrap it again).
            param_space: the experiment's param space, given again: needed when it holds
                values that could not be saved (actor refs), which then replace those
                values in the trials' configs. Its keys must be the original ones.
            resume_unfinished: resume trials that were running or waiting; with
                ``False`` they are kept as ``TERMINATED`` with the results they have.
            resume_errored: resume errored trials from their latest checkpoints.
            restart_errored: run errored trials again from the start (their checkpoints
                are deleted).

        Returns:
            A tuner whose ``fit()`` / ``fit_async()`` finish the experiment.

        Raises:
            TypeError: ``path`` is not a path, or a flag is not a bool.
            ValueError: ``path`` is not an experiment folder (missing, a file, a trial's
                folder, no ``tuner.pkl`` / ``experiment_state.jsonl``) or its files cannot
                be read; ``trainable`` is not a trainable or not named as the experiment's;
                ``param_space`` is not the experiment's; both ``resume_errored`` and
                ``restart_errored``.
            RuntimeError: another process is running the experiment now.
        """
        path = check_local_storage_path(path, "path")
        trainable = _from_trainer(trainable)
        _check_trainable(trainable)
        options = ResumeOptions(resume_unfinished, resume_errored, restart_errored)
        restored = load_experiment(path, trainable_name(trainable), param_space, options)
        tuner = cls.__new__(cls)  # the folder is the experiment's: nothing is written
        tuner._init(trainable, restored.param_space, restored.tune_config, restored.run_config)
        tuner._restored = restored
        tuner._restore_args = (restored.path, param_space, options)
        return tuner

    @classmethod
    def can_restore(cls, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is an experiment folder that :meth:`restore` can continue.

        True once a ``Tuner`` was constructed with that folder as ``storage_path/name``
        (as in Ray, construction writes the experiment's definition), before ``fit()``
        too: restoring it then runs the whole experiment. Also true when it has finished:
        restoring a finished experiment runs nothing and returns its results.
        """
        return can_restore(path)

    def _take_restored(self) -> RestoredExperiment | None:
        restored, self._restored = self._restored, None
        if restored is None and self._restore_args is not None:
            path, space, options = self._restore_args  # fit() again: read the folder again
            restored = load_experiment(path, trainable_name(self.trainable), space, options)
        return restored

    async def fit_async(self) -> ResultGrid:
        """Run the sweep inside a running runtime (``async with actorrt.Runtime()``).

        Cancelling it stops every trial, leaves the experiment restorable and prints how to
        resume it (with ``RunConfig(verbose>=1)``).
        """
        restored = self._take_restored()
        if restored is not None:
            self.tune_config, self.run_config = restored.tune_config, restored.run_config
        prepared, self._prepared = self._prepared, None
        if restored is None and prepared is None:  # fit() again: a new experiment
            prepared = prepare_experiment(
                self.trainable, self.param_space, self.tune_config, self.run_config
            )
        controller = TuneController(
            self.trainable, self.param_space, self.tune_config, self.run_config, restored,
            prepared=prepared,
        )
        self._controller = controller
        self._results = await controller.run()
        failure = self.run_config.failure_config
        if failure is not None and failure.fail_fast == "raise" and self._results.errors:
            # Ray's fail_fast="raise": the experiment stopped; the trial's error propagates.
            raise self._results.errors[0]
        return self._results

    def get_results(self) -> ResultGrid:
        """The results of this tuner's last ``fit()`` (Ray Tune's ``Tuner.get_results``);
        for a tuner from :meth:`restore` that has not run, the results its folder holds
        (trials that had not finished show as ``RUNNING``), read without changing it.

        Raises:
            RuntimeError: a new tuner whose ``fit()`` has not run yet.
        """
        if self._results is None and self._restored is not None:
            from ._controller._saved_results import saved_results

            return saved_results(self._restored)
        if self._results is None:
            raise RuntimeError(
                "Tuner.get_results(): the experiment has not been run yet; call "
                "Tuner.fit() first"
            )
        return self._results

    def fit(self) -> ResultGrid:
        """Run the sweep from synchronous code and return its results.

        Uses the runtime that ``actorrt.init(...)`` started; with none, starts one with
        the machine's resources and shuts it down afterwards.

        **Ctrl-C (SIGINT)** stops every trial (their resources are returned), records
        them as unfinished, prints how to resume (``Tuner.restore("<path>",
        trainable=...)``) and re-raises ``KeyboardInterrupt``. **SIGTERM** does the same and
        then raises ``SystemExit(143)``, so an uncaught one ends the program with status 143
        (128 + SIGTERM, the shell's convention) after ``finally`` blocks and ``atexit``
        handlers ran. SIGTERM is handled so only when called on the main thread with the
        default SIGTERM action in place (or the one ``actorrt.init()`` installed). A second
        Ctrl-C while the trials stop cuts that short; a second SIGTERM, or the stop taking
        more than 30 s, ends the process at once, by SIGTERM.

        Raises:
            RuntimeError: called on a thread whose event loop runs (use ``fit_async``),
                but for a Jupyter notebook's cell: there, as under Ray, the cell waits
                for the sweep and the live view redraws in place in the cell's output.
            KeyboardInterrupt: Ctrl-C (in a notebook: the kernel interrupted).
            SystemExit: SIGTERM (status 143).
        """
        if must_await():
            raise RuntimeError(
                "Tuner.fit() was called from a running event loop; use "
                "`await tuner.fit_async()` there (inside `async with actorrt.Runtime()`)"
            )
        started = False
        if not actorrt.is_initialized():
            try:
                actorrt.init()
                started = True
            except actorrt.RuntimeAlreadyRunningError:
                pass  # a runtime runs on another thread of this process: use it
        # In a notebook the live view redraws one output area of this cell.
        view = CellView() if in_kernel() else None
        token = cell_view.set(view)
        try:
            with _sigterm_interrupts():
                try:
                    grid: ResultGrid = actorrt.get(self._run())
                except KeyboardInterrupt as exc:
                    terminated = isinstance(exc, _Terminated)
                    if self._task is not None:
                        why = "SIGTERM" if terminated else "Ctrl-C"
                        actorrt.get(self._interrupt(why), timeout=DEFAULT_GRACE)
                    if terminated:
                        raise SystemExit(SIGTERM_EXIT_STATUS) from None
                    raise
            return grid
        finally:
            cell_view.reset(token)
            if started:
                actorrt.shutdown()

    async def _run(self) -> ResultGrid:
        self._task = asyncio.ensure_future(self.fit_async())
        return await self._task

    async def _interrupt(self, why: str) -> None:
        task = self._task
        if task is not None and not task.done():
            if self._controller is not None:
                self._controller.stop_reason = why
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
