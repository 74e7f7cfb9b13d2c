"""Configuration objects: ``TuneConfig``, ``RunConfig``, ``SyncConfig``; and, from
:mod:`._trial_config`, ``FailureConfig`` and ``CheckpointConfig``.

Each validates its values where it is built, so a bad value fails at the line that wrote it.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable
from typing import Any

from .._shared._deprecation import (
    RayDeprecationWarning,
    check_local_dir,
    warn_migration,
)
from .._shared._storage_path import check_local_storage_path
from ._controller._trial_config import CheckpointConfig, FailureConfig
from ._worker._workdir import CHDIR_ENV
from .callback import check_callbacks
from .progress_reporter import ProgressReporter
from .schedulers.trial_scheduler import TrialScheduler
from .search.concurrency_limiter import ConcurrencyLimiter
from .search.search_generator import SearchGenerator
from .search.searcher import Searcher

__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "SyncConfig", "TuneConfig"]


DEPRECATED = "DEPRECATED"  # Ray's default for arguments it keeps only to warn about


def _chdir_to_trial_dir(value: Any) -> None:
    """Ray's handling of the deprecated ``chdir_to_trial_dir``: a warning, and ``False``
    sets ``RAY_CHDIR_TO_TRIAL_DIR=0`` for the process (and the trials it starts)."""
    if value == DEPRECATED:
        return
    if not isinstance(value, bool):
        raise ValueError(f"chdir_to_trial_dir must be a bool, got {value!r}")
    warnings.warn(
        "TuneConfig(chdir_to_trial_dir) is deprecated (as in Ray); set the "
        f"{CHDIR_ENV} environment variable instead: {CHDIR_ENV}=0 keeps every trial in "
        "the original working directory",
        RayDeprecationWarning,
        stacklevel=4,
    )
    if value is False:
        os.environ[CHDIR_ENV] = "0"


def _mode(mode: str | None) -> None:
    if mode not in (None, "min", "max"):
        raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")


@dataclasses.dataclass
class TuneConfig:
    """How to search (Ray Tune's ``TuneConfig``).

    Attributes:
        metric: the metric that ``get_best_result``, schedulers and searchers optimise.
        mode: ``"min"`` or ``"max"``.
        search_alg: a :class:`Searcher`; default random/grid search
            (:class:`BasicVariantGenerator`).
        scheduler: a :class:`TrialScheduler`; default FIFO (never stops a trial early).
        num_samples: samples of the param space (each expands its grid); for a searcher
            that does not count samples itself, the number of trials.
        max_concurrent_trials: at most this many trials started and unfinished; ``None``
            or ``0``: no limit (resources still bound it). Wraps the search algorithm in a
            :class:`ConcurrencyLimiter`.
        time_budget_s: stop the experiment after this many seconds (running trials are
            stopped, and count as finished).
        seed: an actorrt addition: seeds the default search algorithm's sampling, so the
            same seed gives the same configs.
        trial_name_creator, trial_dirname_creator: ``trial -> str`` for names and folders.
        reuse_actors: accepted for Ray's signature. actorrt always reuses worker
            processes between trials (a trial's module is imported once per process) and
            always builds a new ``Trainable`` per trial (``reset_config`` is not called);
            ``True`` or ``False`` is therefore warned about once, as it cannot be honoured.
        chdir_to_trial_dir: deprecated in Ray, as here: set the environment variable
            ``RAY_CHDIR_TO_TRIAL_DIR=0`` instead. Given, it warns (``DeprecationWarning``);
            ``False`` then sets that variable, as Ray does, so trials keep the original
            working directory.
    """

    metric: str | None = None
    mode: str | None = None
    search_alg: Searcher | None = None
    scheduler: TrialScheduler | None = None
    num_samples: int = 1
    max_concurrent_trials: int | None = None
    time_budget_s: float | None = None
    seed: int | None = None
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None
    reuse_actors: bool | None = None
    chdir_to_trial_dir: Any = DEPRECATED

    def __post_init__(self) -> None:
        _mode(self.mode)
        _chdir_to_trial_dir(self.chdir_to_trial_dir)
        if self.reuse_actors is not None:
            if not isinstance(self.reuse_actors, bool):
                raise ValueError(f"reuse_actors must be True, False or None, got "
                                 f"{self.reuse_actors!r}")
            warnings.warn(
                f"TuneConfig(reuse_actors={self.reuse_actors}) has no effect in actorrt: "
                "worker processes are always reused between trials and a Trainable is "
                "always built anew per trial (see docs/porting.md)",
                stacklevel=3,
            )
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int):
            raise ValueError(f"num_samples must be an int, got {self.num_samples!r}")
        if self.num_samples < 1:
            raise ValueError(f"num_samples must be at least 1, got {self.num_samples!r}")
        limit = self.max_concurrent_trials
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValueError(
                f"max_concurrent_trials must be an int or None, got {limit!r}"
            )
        if limit is not None and limit < 0:
            raise ValueError(
                f"max_concurrent_trials must be None or 0 (no limit) or positive, got {limit}"
            )
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ValueError(f"time_budget_s must be positive, got {self.time_budget_s!r}")
        if isinstance(self.search_alg, SearchGenerator):  # Ray's wrapper: its searcher runs
            self.search_alg = self.search_alg.searcher
        if self.search_alg is not None and not isinstance(self.search_alg, Searcher):
            raise ValueError(f"search_alg must be a tune Searcher, got {self.search_alg!r}")
        if self.scheduler is not None and not isinstance(self.scheduler, TrialScheduler):
            raise ValueError(f"scheduler must be a TrialScheduler, got {self.scheduler!r}")
        # Fail here, not at fit(), when the limit contradicts a limiter already given.
        limited_search_alg(self.search_alg, self.max_concurrent_trials, warn=False)


def limited_search_alg(
    search_alg: Searcher | None, limit: int | None, *, warn: bool = True
) -> Searcher | None:
    """``search_alg`` wrapped in a ``ConcurrencyLimiter`` when ``limit`` asks for one."""
    if not limit:
        return search_alg
    if isinstance(search_alg, ConcurrencyLimiter):
        if search_alg.max_concurrent != limit:
            raise ValueError(
                f"max_concurrent_trials={limit} contradicts the search algorithm's "
                f"ConcurrencyLimiter(max_concurrent={search_alg.max_concurrent}); give one "
                "limit: drop max_concurrent_trials or the ConcurrencyLimiter"
            )
        if warn:
            warnings.warn(
                f"max_concurrent_trials={limit} repeats the ConcurrencyLimiter's limit; "
                "only one is needed",
                stacklevel=4,
            )
        return search_alg
    if search_alg is None:
        return None  # the controller wraps the default searcher it makes
    return ConcurrencyLimiter(search_alg, limit)


@dataclasses.dataclass
class SyncConfig:
    """Ray's ``SyncConfig``, accepted so scripts run: actorrt writes experiments to local
    storage only, so there is nothing to sync, and ``RunConfig(sync_config=...)`` says so
    with one warning."""

    sync_period: int = 300
    sync_timeout: int = 1800
    sync_artifacts: bool = False
    sync_artifacts_on_checkpoint: bool = True


@dataclasses.dataclass
class RunConfig:
    """Where and how long to run (Ray's ``RunConfig``).

    Attributes:
        name: the experiment's folder name (default: trainable name and time).
        storage_path: where experiment folders go (default ``~/actorrt_results``).
        stop: when a trial stops: a dict ``{"training_iteration": 10}`` (stop when any
            metric reaches its value), a callable ``(trial_id, result) -> bool``, or a
            ``tune.stopper.Stopper``.
        failure_config: retries, see :class:`FailureConfig`.
        checkpoint_config: see :class:`CheckpointConfig`.
        callbacks: ``tune.Callback`` instances, called in the driver at each trial's start,
            result and end and at the experiment's end (a callback that raises is
            reported, and the experiment goes on). A ``tune.logger.TBXLoggerCallback`` is
            added when ``tensorboardX`` is installed and none is given.
        verbose: ``0`` silent; ``1`` the progress (a live view on a terminal, else a
            status line every 10 s), trial errors and retries, and a final table; ``2``
            also a line per trial status change; ``3`` also a line per result.
        progress_reporter: a ``tune.CLIReporter`` / ``JupyterNotebookReporter`` (the
            view's columns, rows, frequency) or your own ``tune.ProgressReporter``.
        log_to_file: accepted for Ray's signature: a trial's stdout and stderr always
            also go to ``output.log`` in its folder; file names given here (a string or
            a pair) are warned about and not used.
        sync_config: accepted for Ray's signature; experiments are written to local
            storage only, so a ``SyncConfig`` is warned about and not used.
        storage_filesystem: must be ``None`` (local storage only).
        local_dir: removed in Ray (``DeprecationWarning`` raised, as Ray raises it): use
            ``storage_path``.
    """

    name: str | None = None
    storage_path: str | None = None
    stop: Any = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    callbacks: list[Any] | None = None
    verbose: int = 1
    progress_reporter: ProgressReporter | None = None
    log_to_file: bool | str | tuple[str, str] = False
    sync_config: Any = None
    storage_filesystem: Any = None
    local_dir: Any = dataclasses.field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        check_local_dir(self.local_dir)
        self.failure_config = _tune_failure_config(self.failure_config)
        self.checkpoint_config = _tune_checkpoint_config(self.checkpoint_config)
        if self.verbose is None:
            self.verbose = 1  # Ray's tune.run(verbose=None)
        self._check_ray_extras()
        check_callbacks(self.callbacks)
        if self.verbose not in (0, 1, 2, 3):
            raise ValueError(f"verbose must be 0, 1, 2 or 3, got {self.verbose!r}")
        if self.name is not None and (not self.name or "/" in self.name):
            raise ValueError(f"name must be a non-empty folder name, got {self.name!r}")
        if not (
            self.stop is None
            or isinstance(self.stop, dict)
            or callable(self.stop)
        ):
            raise ValueError(
                f"stop must be a dict, a callable (trial_id, result) -> bool, or a Stopper; "
                f"got {self.stop!r}"
            )

    def _check_ray_extras(self) -> None:
        reporter = self.progress_reporter
        if reporter is not None and not isinstance(reporter, ProgressReporter):
            raise ValueError(
                "progress_reporter must be a tune.ProgressReporter (CLIReporter, "
                f"JupyterNotebookReporter or your subclass), got {reporter!r}"
            )
        if not isinstance(self.log_to_file, bool):
            if not isinstance(self.log_to_file, str | tuple):
                raise ValueError(
                    f"log_to_file must be a bool, a file name or a pair of them, got "
                    f"{self.log_to_file!r}"
                )
            warnings.warn(
                f"RunConfig(log_to_file={self.log_to_file!r}): a trial's stdout and stderr "
                "go to output.log in its folder; the file names are not used",
                stacklevel=4,
            )
        if self.sync_config is not None:
            warnings.warn(
                "RunConfig(sync_config=...) has no effect: actorrt writes experiments to "
                "local storage only (see docs/porting.md)",
                stacklevel=4,
            )
        object.__setattr__(self, "storage_path", check_local_storage_path(self.storage_path))
        if self.storage_filesystem is not None:
            raise ValueError(
                "storage_filesystem is not supported: actorrt writes experiments to a local "
                f"folder (storage_path), got {self.storage_filesystem!r}"
            )


def _update_your_imports(name: str) -> None:
    """Ray's migration warning for Train's config classes given to Tune."""
    warn_migration(
        f"tune.RunConfig took a ray.train.{name}: Ray 2.x's Tune has its own; please "
        f"update your imports (`ray.train.{name}` -> `ray.tune.{name}`). actorrt takes "
        "Train's as Tune's, as Ray 2.7-2.40 did",
        stacklevel=5,
    )


def _tune_failure_config(config: Any) -> FailureConfig | None:
    """A ``train.FailureConfig`` (Ray 2.7-2.40 passed those to Tuner) as Tune's."""
    if config is None or isinstance(config, FailureConfig):
        return config
    if hasattr(config, "max_failures"):
        _update_your_imports("FailureConfig")
        return FailureConfig(
            max_failures=config.max_failures, fail_fast=getattr(config, "fail_fast", False)
        )
    raise ValueError(f"failure_config must be a FailureConfig, got {config!r}")


def _tune_checkpoint_config(config: Any) -> CheckpointConfig | None:
    """A ``train.CheckpointConfig`` (Ray 2.7-2.40 passed those to Tuner) as Tune's."""
    if config is None or isinstance(config, CheckpointConfig):
        return config
    if hasattr(config, "num_to_keep") and hasattr(config, "checkpoint_score_attribute"):
        _update_your_imports("CheckpointConfig")
        return CheckpointConfig(
            num_to_keep=config.num_to_keep,
            checkpoint_score_attribute=config.checkpoint_score_attribute,
            checkpoint_score_order=config.checkpoint_score_order,
            checkpoint_frequency=int(getattr(config, "checkpoint_frequency", 0)),
            checkpoint_at_end=getattr(config, "checkpoint_at_end", None),
        )
    raise ValueError(f"checkpoint_config must be a CheckpointConfig, got {config!r}")
