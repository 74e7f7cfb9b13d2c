"""``tune.run``: Ray Tune's legacy entry point, mapped onto :class:`Tuner`.

Each argument becomes the ``TuneConfig`` / ``RunConfig`` field Ray maps it to; the ones
that have no meaning on one machine (syncing, export formats, a Ray Client remote) are an
error or one warning, never silently dropped. The result is an
:class:`ExperimentAnalysis` over the trials that ran.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .._shared._deprecation import RayDeprecationWarning
from ._controller._prepare import DEFAULT_STORAGE
from .analysis.experiment_analysis import ExperimentAnalysis
from .error import TuneError
from .experiment.experiment import Experiment, convert_to_experiment_list
from .experiment.trial import ERROR
from .registry import resolve
from .trainable._resources import with_resources
from .trainable.trainable import Trainable
from .tune_config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig
from .tuner import Tuner

__all__ = ["TuneError", "run"]


_RESUME = {
    True: (True, False, False),
    "LOCAL": (True, False, False),
    "AUTO": (True, False, False),
    "ERRORED": (True, True, False),
    "ERRORED_ONLY": (False, True, False),
    "RESTART_ERRORED": (True, False, True),
    "RESTART_ERRORED_ONLY": (False, False, True),
    "AUTO+ERRORED": (True, True, False),
    "AUTO+RESTART_ERRORED": (True, False, True),
}


def _checkpoint_config(
    given: CheckpointConfig | None,
    keep_checkpoints_num: int | None,
    checkpoint_score_attr: str | None,
    checkpoint_freq: int,
    checkpoint_at_end: bool,
) -> CheckpointConfig | None:
    legacy = {
        "keep_checkpoints_num": keep_checkpoints_num,
        "checkpoint_score_attr": checkpoint_score_attr,
        "checkpoint_freq": checkpoint_freq or None,
        "checkpoint_at_end": checkpoint_at_end or None,
    }
    used = [k for k, v in legacy.items() if v is not None]
    if not used:
        return given
    warnings.warn(
        f"tune.run({', '.join(used)}=...) is deprecated in Ray; use "
        "checkpoint_config=tune.CheckpointConfig(...)",
        RayDeprecationWarning,
        stacklevel=3,
    )
    # As Ray does, the older arguments override the fields of checkpoint_config.
    config = dataclasses.replace(given) if given is not None else CheckpointConfig()
    if keep_checkpoints_num is not None:
        config.num_to_keep = keep_checkpoints_num
    if checkpoint_score_attr is not None:
        attr, order = checkpoint_score_attr, "max"
        if attr.startswith("min-"):
            attr, order = attr[4:], "min"
        config.checkpoint_score_attribute, config.checkpoint_score_order = attr, order
    if checkpoint_freq:
        config.checkpoint_frequency = checkpoint_freq
    if checkpoint_at_end:
        config.checkpoint_at_end = True
    config.__post_init__()  # the values given here are checked as CheckpointConfig's
    return config


def _trainable(run_or_experiment: Any, resources_per_trial: Any) -> Any:
    run_or_experiment = resolve(run_or_experiment)
    if not (callable(run_or_experiment) or inspect.isclass(run_or_experiment)):
        raise ValueError(
            "tune.run() takes a function trainable, a tune.Trainable subclass, a registered "
            f"trainable's name or a tune.Experiment, got {run_or_experiment!r}"
        )
    if resources_per_trial is None:
        return run_or_experiment
    return with_resources(run_or_experiment, resources_per_trial)


def run(  # Ray's signature, argument for argument
    run_or_experiment: Callable[..., Any] | type[Trainable] | str | Experiment | list[Experiment],
    *,
    name: str | None = None,
    metric: str | None = None,
    mode: str | None = None,
    stop: Any = None,
    time_budget_s: float | datetime.timedelta | None = None,
    config: dict[str, Any] | None = None,
    resources_per_trial: Any = None,
    num_samples: int = 1,
    storage_path: str | None = None,
    storage_filesystem: Any = None,
    search_alg: Any = None,
    scheduler: Any = None,
    checkpoint_config: CheckpointConfig | None = None,
    verbose: int | None = None,
    progress_reporter: Any = None,
    log_to_file: bool | str | tuple[str, str] = False,
    trial_name_creator: Callable[[Any], str] | None = None,
    trial_dirname_creator: Callable[[Any], str] | None = None,
    sync_config: Any = None,
    export_formats: Sequence[str] | None = None,
    max_failures: int = 0,
    fail_fast: bool | str = False,
    restore: str | None = None,
    server_port: int | None = None,
    resume: bool | str | None = None,
    resume_config: Any = None,
    reuse_actors: bool | None = None,
    raise_on_failed_trial: bool = True,
    callbacks: Sequence[Any] | None = None,
    max_concurrent_trials: int | None = None,
    keep_checkpoints_num: int | None = None,
    checkpoint_score_attr: str | None = None,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    checkpoint_keep_all_ranks: bool = False,
    checkpoint_upload_from_workers: bool = False,
    chdir_to_trial_dir: Any = None,
    local_dir: str | None = None,
    seed: int | None = None,
) -> ExperimentAnalysis:
    """Run an experiment with Ray Tune's legacy API; return an :class:`ExperimentAnalysis`.

    The arguments are Ray's (see Ray's ``tune.run``), mapped onto :class:`Tuner`:
    ``config`` is the param space; ``metric``, ``mode``, ``num_samples``,
    ``search_alg``, ``scheduler``, ``time_budget_s``, ``max_concurrent_trials`` and the
    trial name creators go to ``TuneConfig``; ``name``, ``storage_path`` (or
    ``local_dir``), ``stop``, ``callbacks``, ``verbose``, ``progress_reporter``,
    ``checkpoint_config`` (or the older ``keep_checkpoints_num`` /
    ``checkpoint_score_attr`` / ``checkpoint_freq`` / ``checkpoint_at_end``),
    ``max_failures`` and ``fail_fast`` to ``RunConfig``; ``num_samples=-1`` samples until a
    stopper or the time budget ends the experiment; ``resources_per_trial`` to
    ``tune.with_resources``; ``resume`` (``"AUTO"``, ``"LOCAL"``/``True``,
    ``"ERRORED_ONLY"``, ...) to ``Tuner.restore`` of ``storage_path/name``. ``seed``
    is an actorrt addition (``TuneConfig.seed``).

    Raises:
        TuneError: some trials errored and ``raise_on_failed_trial`` is true.
        Exception: with ``fail_fast="raise"``, the first failed trial's own exception.
        ValueError: an argument actorrt cannot honour (a registered trainable's name, an
            ``Experiment``, ``restore=``, ``storage_filesystem``, a remote ``resume``),
            or a bad value.
    """
    if isinstance(run_or_experiment, list):
        if len(run_or_experiment) != 1:
            raise ValueError(
                f"tune.run() takes one Experiment in a list here, got {len(run_or_experiment)}; "
                "run them with tune.run_experiments (one after another)"
            )
        run_or_experiment = run_or_experiment[0]
    if isinstance(run_or_experiment, Experiment):  # its own settings, as in Ray
        spec = run_or_experiment.spec
        name = run_or_experiment.name or name
        run_or_experiment = spec["run"]
        stop, time_budget_s, config = spec["stop"], spec["time_budget_s"], spec["config"]
        resources_per_trial, num_samples = spec["resources_per_trial"], spec["num_samples"]
        storage_path = spec["storage_path"] or storage_path
        storage_filesystem, sync_config = spec["storage_filesystem"], spec["sync_config"]
        checkpoint_config = spec["checkpoint_config"] or checkpoint_config
        trial_name_creator = spec["trial_name_creator"] or trial_name_creator
        trial_dirname_creator = spec["trial_dirname_creator"] or trial_dirname_creator
        log_to_file, export_formats = spec["log_to_file"], spec["export_formats"]
        max_failures, restore = spec["max_failures"], spec["restore"]
        callbacks = spec["callbacks"] if spec["callbacks"] is not None else callbacks
    if chdir_to_trial_dir is not None:
        raise DeprecationWarning(
            "tune.run(chdir_to_trial_dir=...) is deprecated in Ray and not supported; set "
            "the RAY_CHDIR_TO_TRIAL_DIR environment variable instead"
        )
    if restore is not None:
        raise ValueError(
            "tune.run(restore=<checkpoint>) is not supported; to continue an experiment, "
            "use resume='AUTO' with its name (or tune.Tuner.restore(path, trainable))"
        )
    if fail_fast not in (True, False, "raise"):
        raise ValueError(f"fail_fast must be True, False or 'raise', got {fail_fast!r}")
    if fail_fast and max_failures != 0:
        raise ValueError("max_failures must be 0 if fail_fast=True (as in Ray)")
    unused = [
        arg for arg, value in (
            ("server_port", server_port),
            ("checkpoint_keep_all_ranks", checkpoint_keep_all_ranks or None),
            ("checkpoint_upload_from_workers", checkpoint_upload_from_workers or None),
        ) if value is not None
    ]
    if unused:
        warnings.warn(
            f"tune.run({', '.join(unused)}=...) has no effect in actorrt (no Tune "
            "server, one storage folder)",
            stacklevel=2,
        )
    if isinstance(time_budget_s, datetime.timedelta):
        time_budget_s = time_budget_s.total_seconds()
    if num_samples == -1:
        num_samples = sys.maxsize  # Ray's "until something stops the experiment"
    if export_formats:
        warnings.warn(
            f"tune.run(export_formats={list(export_formats)!r}) has no effect: trials keep "
            "their checkpoints only (see docs/porting.md)",
            stacklevel=2,
        )
    if resume_config is not None:
        warnings.warn(
            "tune.run(resume_config=...) has no effect; use resume='ERRORED_ONLY' etc.",
            stacklevel=2,
        )
    if local_dir is not None:
        if storage_path is not None:
            raise ValueError("tune.run(): give storage_path or local_dir, not both")
        warnings.warn(
            "tune.run(local_dir=...) is deprecated in Ray; use storage_path=",
            RayDeprecationWarning,
            stacklevel=2,
        )
        storage_path = local_dir
    trainable = _trainable(run_or_experiment, resources_per_trial)
    run_config = RunConfig(
        name=name,
        storage_path=storage_path,
        stop=stop,
        failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast),
        checkpoint_config=_checkpoint_config(
            checkpoint_config, keep_checkpoints_num, checkpoint_score_attr,
            checkpoint_freq, checkpoint_at_end,
        ),
        callbacks=list(callbacks) if callbacks is not None else None,
        verbose=1 if verbose is None else verbose,
        progress_reporter=progress_reporter,
        log_to_file=log_to_file,
        sync_config=sync_config,
        storage_filesystem=storage_filesystem,
    )
    tune_config = TuneConfig(
        metric=metric,
        mode=mode,
        search_alg=search_alg,
        scheduler=scheduler,
        num_samples=num_samples,
        max_concurrent_trials=max_concurrent_trials,
        time_budget_s=time_budget_s,
        seed=seed,
        trial_name_creator=trial_name_creator,
        trial_dirname_creator=trial_dirname_creator,
        reuse_actors=reuse_actors,
    )
    tuner = _resumed(resume, trainable, name, storage_path, config)
    if tuner is None:
        tuner = Tuner(
            trainable, param_space=config, tune_config=tune_config, run_config=run_config
        )
    tuner.fit()
    controller = tuner._controller
    assert controller is not None
    errored = [t for t in controller.trials if t.status == ERROR]
    if errored and raise_on_failed_trial:
        raise TuneError("Trials did not complete", errored)
    return ExperimentAnalysis(
        controller.storage.path,
        trials=controller.trials,
        default_metric=metric,
        default_mode=mode,
    )


def _resumed(
    resume: bool | str | None,
    trainable: Any,
    name: str | None,
    storage_path: str | None,
    config: dict[str, Any] | None,
) -> Tuner | None:
    """The tuner that continues ``storage_path/name`` as ``resume`` asks, or ``None`` to
    start afresh."""
    if resume in (None, False):
        return None
    key = resume.upper() if isinstance(resume, str) else resume
    if key not in _RESUME:
        raise ValueError(
            f"resume must be one of {[k for k in _RESUME if k is not True]}, True, False or "
            f"None (remote storage is not supported), got {resume!r}"
        )
    if name is None:
        raise ValueError("tune.run(resume=...) needs name= to find the experiment to resume")
    path = os.path.join(os.path.expanduser(storage_path or DEFAULT_STORAGE), name)
    if not Tuner.can_restore(path):
        if key != "AUTO" and not str(key).startswith("AUTO"):
            warnings.warn(
                f"tune.run(resume={resume!r}): no experiment to resume in {path}; starting a "
                "new one",
                stacklevel=3,
            )
        return None
    unfinished, errored, restart = _RESUME[key]
    return Tuner.restore(
        path,
        trainable,
        param_space=config,
        resume_unfinished=unfinished,
        resume_errored=errored,
        restart_errored=restart,
    )


def run_experiments(
    experiments: Experiment | dict[str, dict[str, Any]] | list[Experiment],
    scheduler: Any = None,
    server_port: int | None = None,
    verbose: int = 2,
    progress_reporter: Any = None,
    resume: bool | str | None = False,
    reuse_actors: bool | None = None,
    raise_on_failed_trial: bool = True,
    concurrent: bool = True,
    callbacks: Sequence[Any] | None = None,
) -> list[Any]:
    """Run experiments (Ray's ``tune.run_experiments``); return every trial of them.

    ``experiments`` is an ``Experiment``, a list of them, or a dict of specs by name (each
    as ``Experiment.from_json`` takes it). Ray runs several at once in one controller;
    here they run one after another, in order, and a warning says so when there are
    several and ``concurrent`` is true.
    """
    try:
        listed = convert_to_experiment_list(experiments)
    except TypeError as exc:
        raise TypeError(f"run_experiments(): {exc}") from None
    if concurrent and len(listed) > 1:
        warnings.warn(
            f"run_experiments(): the {len(listed)} experiments run one after another here, "
            "not at the same time as in Ray",
            stacklevel=2,
        )
    trials: list[Any] = []
    for experiment in listed:
        analysis = run(
            experiment, scheduler=scheduler, server_port=server_port, verbose=verbose,
            progress_reporter=progress_reporter, resume=resume, reuse_actors=reuse_actors,
            raise_on_failed_trial=raise_on_failed_trial, callbacks=callbacks,
        )
        trials.extend(analysis.trials)
    return trials
