"""``DataParallelTrainer``: run one training function on a gang of workers.

The coordinator is the code that calls ``fit()``: the driver program (through the sync
facade, which ``fit()`` starts if no runtime runs), a coroutine (``await fit_async()``),
or a Tune trial's driver actor. It splits ``datasets`` into one shard per rank
(``_data``), places the gang (``_placement``), runs attempts until one succeeds or
``FailureConfig`` gives up, keeps rank 0's reports and every rank's checkpoints
(``_checkpoint_book``), and gives everything back before returning: the workers end
(their processes go back to the pool) and a group it reserved is removed. Then, as in
Ray Train V2, a run that failed raises (``_errors``): ``WorkerGroupError`` or
``ControllerError``.

Inside a Tune trial (``fit()`` called in the process of a running trial, which Tune, or
another sweep library, makes known through ``set_trial_provider``; see
``actorrt._shared._trial_hook``), each of rank 0's reports is also the trial's result:
forwarded in order, with its checkpoint, awaited on the event loop (the trial's thread is
the one blocked in ``fit()``). When Tune answers stop, the whole gang is killed at once,
the reservation is given back, and ``fit()`` raises Tune's stop signal, so the trial ends
as stopped.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import actorrt
from actorrt._notebook import must_await

from .._shared._checkpoint import Checkpoint
from .._shared._trial_hook import EnclosingTrial, enclosing_trial
from ._callback import TrainRunContext, UserCallback, for_trial, user_callbacks
from ._checkpoint_book import CheckpointBook
from ._data import check_datasets, split_datasets
from ._gang import Gang, GangFailed
from ._placement import place_gang
from ._recorder import Recorder
from ._result import RESULTS_FILE, Result
from ._run_config import RunConfig
from ._scaling import ScalingConfig
from ._unsupported import PORTING, V2_REMOVED, reject
from ._worker import RunSpec
from ._worker_group import BackendHooks, WorkerGroup
from .backend import BackendConfig, WorkerBackend, WorkerSetup
from .error import ControllerError, TrainingFailedError, WorkerGroupError, summary, tracebacks

logger = logging.getLogger("actorrt.train")


class DataParallelTrainer:
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` workers at once.

    Each worker is a worker-process actor placed in its own bundle of one gang reserved
    atomically; the variables ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
    ``LOCAL_WORLD_SIZE``, ``NODE_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` are set while
    the function runs. Inside it, ``train.report``, ``train.get_checkpoint`` and
    ``train.get_context`` work. This base trainer sets up no framework;
    ``actorrt.train.torch.TorchTrainer`` also starts ``torch.distributed``.

    Args:
        train_loop_per_worker: the training function; it takes ``train_loop_config`` if it
            has a parameter, else nothing. It and its config must pickle.
        train_loop_config: the dict passed to it (default ``{}``).
        backend_config: a ``BackendConfig`` whose ``backend_cls`` hooks (``on_start``,
            ``on_training_start``, ``on_shutdown``) run in this process with each
            attempt's ``WorkerGroup``, as in Ray Train (default: none).
        scaling_config: workers and their resources (default: one CPU worker).
        run_config: name, storage, failure and checkpoint policies; its
            ``train.UserCallback``s are called after each report and failure.
        datasets: in-memory data by name (numpy arrays, dicts of arrays, pandas
            DataFrames, torch map-style Datasets, lists); each worker reads its own
            disjoint shard with ``train.get_dataset_shard(name)``. Ray Data datasets are
            not supported (``TypeError``; see docs/porting.md).
        dataset_config: Ray Data's; not supported (``TypeError`` unless ``None``).
        resume_from_checkpoint, metadata: removed in Ray Train V2, which raises
            ``DeprecationWarning`` for them; so does this (unless ``None``).

    Raises:
        TypeError: a training function that is not callable, or bad configs.
        DeprecationWarning: ``resume_from_checkpoint`` or ``metadata`` given, as in V2.
        ValueError: a function that takes more than one argument, or none while a config
            is given.
    """

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        backend_config: BackendConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        backend_config = backend_config if backend_config is not None else BackendConfig()
        if not isinstance(backend_config, BackendConfig):
            raise TypeError(
                "backend_config must be a BackendConfig (subclass "
                f"actorrt.train.backend.BackendConfig), got {backend_config!r}"
            )
        reject(type(self).__name__, {
            "dataset_config": dataset_config,
            "resume_from_checkpoint": resume_from_checkpoint,
            "metadata": metadata,
        })
        if not callable(train_loop_per_worker):
            raise TypeError(
                f"train_loop_per_worker must be a function, got {train_loop_per_worker!r}"
            )
        if train_loop_config is not None and not isinstance(train_loop_config, Mapping):
            raise TypeError(f"train_loop_config must be a dict, got {train_loop_config!r}")
        scaling_config = scaling_config if scaling_config is not None else ScalingConfig()
        if not isinstance(scaling_config, ScalingConfig):
            raise TypeError(f"scaling_config must be a ScalingConfig, got {scaling_config!r}")
        run_config = run_config if run_config is not None else RunConfig()
        if not isinstance(run_config, RunConfig):
            raise TypeError(f"run_config must be a train.RunConfig, got {run_config!r}")
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = dict(train_loop_config or {})
        self.scaling_config = scaling_config
        self.run_config = run_config
        self.backend_config = backend_config
        self.datasets = check_datasets(datasets)
        self._warned_tune_settings = False
        self._pass_config = _takes_config(train_loop_per_worker, train_loop_config is not None)

    @classmethod
    def restore(cls, *args: Any, **kwargs: Any) -> DataParallelTrainer:
        """Removed in Ray Train V2, as here: rerun with the same ``RunConfig(name,
        storage_path)`` instead, which resumes from that run's latest checkpoint.

        Raises:
            DeprecationWarning: always, as Ray Train V2 does.
        """
        raise DeprecationWarning(f"{V2_REMOVED['restore']} ({PORTING})")

    @classmethod
    def can_restore(cls, *args: Any, **kwargs: Any) -> bool:
        """Removed in Ray Train V2, as here (see ``restore``).

        Raises:
            DeprecationWarning: always, as Ray Train V2 does.
        """
        raise DeprecationWarning(f"{V2_REMOVED['restore']} ({PORTING})")

    def _backend(self) -> WorkerBackend:
        """The hooks each worker runs around the function (none here)."""
        return WorkerBackend()

    def fit(self) -> Result:
        """Run to the end from synchronous code and return the ``Result``.

        Starts a runtime with ``actorrt.init()`` if none runs in this process (it stays up
        afterwards, as ``ray.init`` does). As in Ray Train V2, a run that fails beyond
        ``FailureConfig`` raises: each failed rank's traceback is logged once (``[Rank r]``
        on each line) and ``fit()`` raises a ``WorkerGroupError`` (its ``worker_failures``
        maps each failed rank of the last attempt to its exception), or a
        ``ControllerError`` when the coordinating side itself failed.

        Called by a Tune trial (in the trial's process), rank 0's reports are also the
        trial's results; see ``fit_async``. A failure then makes the trial ERROR.

        Raises:
            WorkerGroupError, ControllerError: training failed (both are
                ``TrainingFailedError``).
            RuntimeError: called on a thread whose event loop runs (use ``fit_async``),
                but for a Jupyter notebook's cell, which waits for the run, as under Ray.
            ValueError, actorrt.InfeasibleResourceError, actorrt.ResourceDeadlockError:
                the gang can never be placed.
            tune.StopTrial: inside a Tune trial, Tune told the trial to stop (let it
                propagate: the trial then ends as stopped).
        """
        if must_await():  # a notebook's cell waits, as under Ray
            raise RuntimeError(
                "fit() blocks until training ends; on a thread whose event loop runs, use "
                "`await trainer.fit_async()`"
            )
        try:
            actorrt.get(_nothing())
        except actorrt.NoRuntimeError:
            actorrt.init()
        result: Result = actorrt.get(self.fit_async())
        return result

    async def fit_async(self) -> Result:
        """``fit()`` for async code running a runtime (``async with actorrt.Runtime()``).

        Inside a Tune trial (the process runs one, and its trial called this), each of rank
        0's reports is also reported to the trial: metrics and checkpoint (linked into the
        trial's folder), in order, so ``training_iteration`` counts them and schedulers
        and stop criteria see them. Rank 0's ``train.report`` then returns once Tune has
        decided, as ``tune.report`` does. When Tune answers stop, every worker is killed
        at once, the gang's reservation is given back, and this raises Tune's
        ``StopTrial``. Without a ``storage_path``, the run's folder is inside the
        trial's folder; a restarted trial's workers resume from the trial's checkpoint.
        """
        self.scaling_config._check_resolved()
        trial = enclosing_trial()
        unused = sorted(self.run_config.tune_settings())
        unused += self.run_config.checkpoint_config.tune_settings()
        if trial is None and unused and not self._warned_tune_settings:
            self._warned_tune_settings = True
            logger.warning(
                "train: RunConfig %s take effect only under tune.Tuner; this fit() does "
                "not use them (pass the trainer to tune.Tuner, as in Ray)", unused
            )
        name = f"{type(self).__name__}_{time.strftime('%Y-%m-%d_%H-%M-%S')}_{secrets.token_hex(2)}"
        if trial is not None and self.run_config.storage_path is None:
            run_dir = Path(trial.trial_dir) / (self.run_config.name or name)
        else:
            run_dir = self.run_config.run_dir(name)
        run_dir.mkdir(parents=True, exist_ok=True)
        shards = split_datasets(self.datasets, self.scaling_config.num_workers)
        placement = await place_gang(self.scaling_config)
        try:
            result, stopped = await self._attempts(placement.placements, run_dir, trial, shards)
        finally:
            await placement.release()
        if stopped:
            assert trial is not None
            raise trial.stop_signal()
        if result.error is not None:
            raise result.error  # Ray Train V2: fit() raises what made the run fail
        return result

    async def _attempts(
        self,
        placements: list[Any],
        run_dir: Path,
        trial: EnclosingTrial | None,
        shards: list[dict[str, Any]],
    ) -> tuple[Result, bool]:
        """Run gangs until one finishes, ``FailureConfig`` gives up, or Tune says stop;
        return the ``Result`` (its ``error`` set when training failed) and whether Tune
        stopped the run."""
        try:
            book = CheckpointBook(self.run_config.checkpoint_config, run_dir)
        except RuntimeError as exc:  # an earlier run's snapshot that cannot be resumed
            raise ControllerError(exc) from exc
        failures: list[str] = []
        error: TrainingFailedError | None = None
        restore = trial.restore_checkpoint if trial is not None else None
        # Appending a line per report is microseconds of local I/O; a log kept as it goes
        # survives a crash of the coordinator, which buffering to the end would not.
        callbacks = user_callbacks(self.run_config.callbacks)
        run_context = self._run_context()
        hooks = BackendHooks(self.backend_config)

        async def after_report(every: list[dict[str, Any]], stored: Checkpoint | None) -> None:
            for callback in callbacks:
                await asyncio.to_thread(callback.after_report, run_context=run_context,
                                        metrics=every, checkpoint=stored)

        for callback in callbacks:
            await asyncio.to_thread(callback.before_run, run_context=run_context)
        with open(run_dir / RESULTS_FILE, "a", buffering=1) as results:  # noqa: ASYNC230
            on_report = Recorder(
                book, results, trial, after_report if callbacks else None, for_trial(callbacks)
            )
            while not on_report.stopped:
                on_report.attempt_started(book.start_attempt())
                latest = book.latest
                resume = latest.path if latest is not None else restore
                spec = self._spec(run_dir, book, resume, trial)
                try:
                    await self._attempt(placements, spec, on_report, shards, hooks)
                    book.adopt_unrecorded(on_report.attempt_metrics)
                    break
                except GangFailed as failed:
                    book.discard_unrecorded()
                    try:
                        await _after_exception(callbacks, run_context, failed)
                    except Exception as exc:  # a UserCallback's failure ends the run
                        error = ControllerError(exc)
                        error.__cause__ = exc
                        break
                    if on_report.stopped:
                        break  # Tune stopped the trial meanwhile: no restart
                    failures.append(f"attempt {len(failures) + 1}: {failed}")
                    logger.error(
                        "training attempt %d failed:\n%s", len(failures),
                        tracebacks(failed.failures),
                    )
                    error = self._give_up(failures, failed, book)
                    if error is not None:
                        break
                except (ValueError, TypeError, actorrt.ResourceDeadlockError):
                    raise  # a configuration error: raised as it is, at once
                except Exception as exc:
                    error = ControllerError(exc)
                    error.__cause__ = exc
                    break
        history = on_report.history
        result = Result(
            metrics=dict(history[-1]) if history else {},
            checkpoint=book.latest,
            path=str(run_dir),
            error=error,
            metrics_history=history,
            best_checkpoints=book.best(),
            num_failures=len(failures),
            failures=failures,
        )
        for callback in callbacks:
            await asyncio.to_thread(callback.after_run, run_context=run_context, result=result)
        return result, on_report.stopped

    async def _attempt(
        self,
        placements: list[Any],
        spec: RunSpec,
        on_report: Recorder,
        shards: list[dict[str, Any]],
        hooks: BackendHooks,
    ) -> None:
        """One gang on the reservation: started, run, and ended before this returns;
        the backend's hooks are called around the run, as in Ray Train.

        Raises:
            GangFailed: a worker failed (every worker has been killed).
        """
        gang = Gang(placements, self.scaling_config.worker_bundle())
        group: WorkerGroup | None = None
        try:
            await gang.start()
            if hooks.custom:
                group = WorkerGroup(gang, asyncio.get_running_loop(), spec.experiment_name)
                await hooks.start(group)
            finished = await gang.run(spec, on_report, shards)
        except GangFailed:
            if group is not None:
                await hooks.shutdown(group)
            raise
        except BaseException:
            if group is not None:
                await asyncio.shield(hooks.shutdown(group))
            await asyncio.shield(gang.kill())
            raise
        if group is not None:
            await hooks.shutdown(group)
        if finished:  # else Tune said stop, and the gang is already gone
            # A user's backend may have changed the workers' processes (variables,
            # imports): as Ray's per-run workers, they are not reused.
            await gang.stop(reuse=not hooks.custom)

    def _give_up(
        self, failures: list[str], failed: GangFailed, book: CheckpointBook
    ) -> WorkerGroupError | None:
        """The run's error once ``FailureConfig`` allows no more restarts, else ``None``."""
        allowed = self.run_config.failure_config.max_failures
        if allowed != -1 and len(failures) > allowed:
            error = WorkerGroupError(
                f"{summary(failed.failures)}\n(the gang failed {len(failures)} time(s), "
                f"more than FailureConfig(max_failures={allowed}) allows; each rank's "
                "traceback was logged above, prefixed with its rank)",
                failed.failures,
            )
            # Not chained: the workers' tracebacks are logged once, not again under this.
            error.__suppress_context__ = True
            return error
        logger.warning(
            "%s; restarting the gang (%d of %s) from %s", failed, len(failures),
            "unlimited" if allowed == -1 else allowed, book.latest or "the start",
        )
        return None

    def _run_context(self) -> TrainRunContext:
        """What the run's ``UserCallback``s are told about it."""
        return TrainRunContext(
            run_config=self.run_config,
            train_loop_config=dict(self.train_loop_config),
            scaling_config=self.scaling_config,
            backend_config=self.backend_config,
            datasets=dict(self.datasets),
        )

    def _spec(
        self,
        run_dir: Path,
        book: CheckpointBook,
        restore: str | None,
        trial: EnclosingTrial | None,
    ) -> RunSpec:
        return RunSpec(
            train_fn=self.train_loop_per_worker,
            pass_config=self._pass_config,
            config=self.train_loop_config,
            setup=WorkerSetup(0, 0, 1, 1, 0, "", 0, None),  # each worker gets its own
            env={},
            backend=self._backend(),
            run_dir=str(run_dir),
            experiment_name=run_dir.name,
            restore=restore,
            next_index=book.next_index,
            score_attribute=self.run_config.checkpoint_config.checkpoint_score_attribute,
            report_waits=trial is not None,
            # In a Tune trial the workers share the trial's working directory (its folder,
            # unless RAY_CHDIR_TO_TRIAL_DIR=0), as Ray's do.
            working_dir=os.getcwd() if trial is not None else None,
        )

    def as_trainable(self) -> Callable[[dict[str, Any]], None]:
        """This trainer as a Tune function trainable: what ``tune.Tuner(trainer)`` runs.

        Each trial fits a copy of this trainer: its ``train_loop_config`` updated with the
        trial config's ``"train_loop_config"`` dict, and its ``scaling_config`` replaced by
        the trial config's ``"scaling_config"`` when given (Ray Train's keys). Rank 0's
        reports become the trial's results. ``Tuner`` declares each trial's resources from
        the scaling config in use, so a trial's driver and its workers are one gang.
        """
        trainer = self

        def trial(config: dict[str, Any]) -> None:
            trainer.for_trial(config).fit()  # a failed run raises: the trial errors

        trial.__name__ = type(self).__name__
        trial.__qualname__ = type(self).__name__
        return trial

    def for_trial(self, config: Mapping[str, Any]) -> DataParallelTrainer:
        """A copy of this trainer with a Tune trial config's overrides (``as_trainable``).

        Raises:
            ValueError: ``config`` has keys other than ``train_loop_config`` and
                ``scaling_config``, or a ``train_loop_config`` for a function that takes
                none.
            TypeError: a ``train_loop_config`` that is not a dict, or a ``scaling_config``
                that is not a ``ScalingConfig``.
        """
        unknown = sorted(set(config) - {"train_loop_config", "scaling_config"})
        if unknown:
            raise ValueError(
                f"a Tuner over a {type(self).__name__} takes param_space keys "
                f"'train_loop_config' and 'scaling_config'; got also {unknown}"
            )
        overrides = config.get("train_loop_config")
        if overrides is not None and not isinstance(overrides, Mapping):
            raise TypeError(f"param_space['train_loop_config'] must be a dict, got {overrides!r}")
        scaling = _scaling_of(config)
        if scaling is not None and not isinstance(scaling, ScalingConfig):
            raise TypeError(
                f"param_space['scaling_config'] must be a ScalingConfig, got {scaling!r}"
            )
        fitted = copy.copy(self)
        if overrides:
            if not self._pass_config:
                raise ValueError(
                    f"param_space['train_loop_config'] was given but "
                    f"{getattr(self.train_loop_per_worker, '__name__', '?')!r} takes no config"
                )
            fitted.train_loop_config = {**self.train_loop_config, **overrides}
        if scaling is not None:
            fitted.scaling_config = scaling
        return fitted

    def trial_resources(self, config: Mapping[str, Any]) -> ScalingConfig:
        """What a trial of ``as_trainable`` reserves: the scaling config it will use."""
        scaling = _scaling_of(config)
        return scaling if isinstance(scaling, ScalingConfig) else self.scaling_config

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({getattr(self.train_loop_per_worker, '__name__', '?')}, "
            f"scaling_config={self.scaling_config!r})"
        )


def _takes_config(func: Callable[..., Any], config_given: bool) -> bool:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return config_given
    positional = [
        p for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    required = [p for p in positional if p.default is p.empty and p.kind != p.VAR_POSITIONAL]
    if len(required) > 1:
        raise ValueError(
            f"train_loop_per_worker takes one argument (the config) or none; "
            f"{getattr(func, '__name__', func)!r} requires {len(required)}"
        )
    if not positional:
        if config_given:
            raise ValueError(
                f"train_loop_config was given but {getattr(func, '__name__', func)!r} takes "
                "no argument to receive it; add a `config` parameter"
            )
        return False
    return True


async def _nothing() -> None:
    return None


async def _after_exception(
    callbacks: list[UserCallback], run_context: TrainRunContext, failed: GangFailed
) -> None:
    """Tell the run's ``UserCallback``s which workers failed (rank: exception)."""
    errors = {
        rank: error if isinstance(error, Exception) else RuntimeError(repr(error))
        for rank, error in sorted(failed.failures.items())
    }
    for callback in callbacks:
        await asyncio.to_thread(
            callback.after_exception, run_context=run_context, worker_exceptions=errors
        )


def _scaling_of(config: Mapping[str, Any]) -> Any:
    """A trial config's ``"scaling_config"``: a ``ScalingConfig``, or the dict of its
    fields that a Tuner resolved (Ray's form when it holds search values)."""
    scaling = config.get("scaling_config")
    if isinstance(scaling, Mapping):
        return ScalingConfig(**scaling)
    return scaling
