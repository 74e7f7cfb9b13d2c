"""Where a run writes, how it retries, which checkpoints it keeps (Ray Train's names)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._shared._deprecation import check_local_dir, warn_deprecated
from .._shared._storage_path import check_local_storage_path
from ._callback import UserCallback
from ._unsupported import reject

DEFAULT_STORAGE = "~/actorrt_results"


@dataclass(frozen=True)
class FailureConfig:
    """How many times a run restarts after a failure.

    A failure is any worker ending early: its process dying (a crash, a SIGKILL, the
    out-of-memory killer) or the training function raising. The surviving workers are
    killed (they would hang in the next collective) and the whole gang restarts from the
    latest checkpoint, on the same reservation.

    Args:
        max_failures: restarts allowed; ``0`` (default): none; ``-1``: unlimited.
        controller_failure_limit, max_preemption_failures: Ray Train V2's limits for
            failures of its controller actor and for preempted nodes (``-1``, the default:
            unlimited). Checked and kept; neither failure occurs here (the run's driver is
            the calling process, and there is no preemption), so they never count.
        fail_fast: Tune's (Ray 2.7-2.40 took it here): used when this config reaches
            ``tune.Tuner``; given, it warns, as Ray Train V2 refuses it.

    Raises:
        ValueError: a limit below ``-1``.
    """

    max_failures: int = 0
    controller_failure_limit: int = -1
    max_preemption_failures: int = -1
    fail_fast: bool | str = field(default=False, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        if self.fail_fast is not False:
            warn_deprecated(
                "`ray.train.FailureConfig(fail_fast)` is deprecated since it is only "
                "relevant in the context of Ray Tune (Ray Train V2 raises "
                "DeprecationWarning for it). actorrt still accepts it, as Ray 2.7-2.40 "
                "did: it takes effect when this config reaches tune.Tuner; use "
                "tune.FailureConfig(fail_fast=...)",
                stacklevel=3,
            )
        for name in ("max_failures", "controller_failure_limit", "max_preemption_failures"):
            n = getattr(self, name)
            if isinstance(n, bool) or not isinstance(n, int):
                raise TypeError(f"{name} must be an int, got {n!r} ({type(n).__name__})")
            if n < -1:
                raise ValueError(f"{name} must be -1 (unlimited) or >= 0, got {n}")


@dataclass(frozen=True)
class CheckpointConfig:
    """Which of the reported checkpoints stay on disk.

    Args:
        num_to_keep: keep at most this many (``None``: all). Without a score attribute the
            most recent are kept; with one, the best. The latest checkpoint is kept in
            any case, since a restart resumes from it, so a run may hold
            ``num_to_keep + 1`` while its latest is not among the best.
        checkpoint_score_attribute: a metric reported with each checkpoint, used to rank
            them; ``train.report`` raises ``ValueError`` when a checkpoint comes without it.
        checkpoint_score_order: ``"max"`` (higher is better) or ``"min"``.
        checkpoint_frequency, checkpoint_at_end: Ray 2.7-2.40's spellings, still accepted:
            they take effect when this config reaches ``tune.Tuner`` (a class
            ``Trainable`` saves every ``checkpoint_frequency`` iterations and at the end);
            a training loop saves what it passes to ``train.report(checkpoint=...)``, so a
            trainer's own ``fit()`` warns that it does not use them.

    Raises:
        ValueError: ``num_to_keep < 1``, an unknown order or a negative frequency.
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def tune_settings(self) -> list[str]:
        """The Tune-only settings that were given."""
        given = {"checkpoint_frequency": self.checkpoint_frequency or None,
                 "checkpoint_at_end": self.checkpoint_at_end}
        return [f"CheckpointConfig({k})" for k, v in given.items() if v is not None]

    def __post_init__(self) -> None:
        frequency = self.checkpoint_frequency
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
            raise ValueError(
                f"checkpoint_frequency must be an int >= 0 (0: never), got {frequency!r}"
            )
        if self.checkpoint_at_end not in (None, True, False):
            raise ValueError(
                f"checkpoint_at_end must be True, False or None, got {self.checkpoint_at_end!r}"
            )
        n = self.num_to_keep
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, int):
                raise TypeError(f"num_to_keep must be an int or None, got {n!r}")
            if n < 1:
                raise ValueError(f"num_to_keep must be at least 1 (or None: keep all), got {n}")
        attr = self.checkpoint_score_attribute
        if attr is not None and (not isinstance(attr, str) or not attr):
            raise TypeError(f"checkpoint_score_attribute must be a metric name, got {attr!r}")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError(
                f"checkpoint_score_order must be 'max' or 'min', "
                f"got {self.checkpoint_score_order!r}"
            )


@dataclass(frozen=True)
class RunConfig:
    """A run's name, where it writes, and its failure and checkpoint policies.

    Args:
        name: the run's folder under ``storage_path`` (default: the trainer's class name
            and a timestamp).
        storage_path: where runs are written (default ``~/actorrt_results``).
        failure_config: restarts after failures (default: none).
        checkpoint_config: which checkpoints are kept (default: all).
        callbacks: ``train.UserCallback`` instances, which the trainer calls (Ray Train
            V2's); any other callback is Tune's (below).
        stop, verbose, progress_reporter, log_to_file, sync_config, Tune callbacks: Tune's
            settings, as Ray 2.7-2.40's shared ``RunConfig`` had them: they take effect
            when this config is given to ``tune.Tuner`` (or the trainer runs under one);
            a trainer's own ``fit()`` warns that it does not use them.
        storage_filesystem, worker_runtime_env: Ray's; not supported (a ``TypeError``
            naming docs/porting.md unless ``None``).
        local_dir: removed in Ray, which raises ``DeprecationWarning`` for it; so does
            this (use ``storage_path``).

    Raises:
        ValueError: a bad name, or a cloud ``storage_path`` (``s3://``, ``gs://``, ...).
        TypeError: a config of the wrong type, or one of Ray's unsupported arguments.
    """

    name: str | None = None
    storage_path: str | os.PathLike[str] | None = None
    failure_config: FailureConfig = field(default_factory=FailureConfig)
    checkpoint_config: CheckpointConfig = field(default_factory=CheckpointConfig)
    stop: Any = None
    callbacks: list[Any] | None = None
    verbose: int | None = None
    progress_reporter: Any = None
    log_to_file: Any = False
    sync_config: Any = None

    def tune_settings(self) -> dict[str, Any]:
        """The Tune-only settings that were given (not their defaults)."""
        tune_callbacks = [
            c for c in self.callbacks or () if not isinstance(c, UserCallback)
        ] or None
        given = {
            "stop": self.stop, "callbacks": tune_callbacks, "verbose": self.verbose,
            "progress_reporter": self.progress_reporter, "sync_config": self.sync_config,
        }
        settings = {k: v for k, v in given.items() if v is not None}
        if self.log_to_file is not False:
            settings["log_to_file"] = self.log_to_file
        return settings

    # Ray's, refused with a pointer to docs/porting.md (kept out of repr and equality).
    storage_filesystem: Any = field(default=None, repr=False, compare=False, kw_only=True)
    worker_runtime_env: Any = field(default=None, repr=False, compare=False, kw_only=True)
    local_dir: Any = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        check_local_dir(self.local_dir)
        if self.callbacks is not None and not isinstance(self.callbacks, list | tuple):
            raise TypeError(
                f"callbacks must be a list (of train.UserCallback, or tune.Callback for a "
                f"Tuner), got {self.callbacks!r}"
            )
        for param in sorted(self.tune_settings()):
            warn_deprecated(
                f"`RunConfig({param})` is deprecated. This configuration was a Ray Tune API "
                "that did not support Ray Train usage well (Ray Train V2 raises "
                "DeprecationWarning for it). actorrt still accepts it, as Ray 2.7-2.40 did: "
                "it takes effect when this RunConfig reaches tune.Tuner; pass it in "
                "tune.RunConfig instead",
                stacklevel=3,
            )
        reject("RunConfig", {
            "storage_filesystem": self.storage_filesystem,
            "worker_runtime_env": self.worker_runtime_env or None,
        })
        object.__setattr__(self, "storage_path", check_local_storage_path(self.storage_path))
        if self.name is not None and (not isinstance(self.name, str) or not self.name
                                      or "/" in self.name):
            raise ValueError(f"name must be a non-empty folder name without '/', got "
                             f"{self.name!r}")
        if self.failure_config is None:
            object.__setattr__(self, "failure_config", FailureConfig())
        if self.checkpoint_config is None:
            object.__setattr__(self, "checkpoint_config", CheckpointConfig())
        if not isinstance(self.failure_config, FailureConfig):
            raise TypeError(f"failure_config must be a FailureConfig, got "
                            f"{self.failure_config!r}")
        if not isinstance(self.checkpoint_config, CheckpointConfig):
            raise TypeError(f"checkpoint_config must be a CheckpointConfig, got "
                            f"{self.checkpoint_config!r}")

    def run_dir(self, default_name: str) -> Path:
        """The run's folder: ``storage_path / name`` (not created here)."""
        root_text = os.fspath(self.storage_path or DEFAULT_STORAGE)
        root_text = root_text.removeprefix("file://")  # a local URI, as Ray accepts
        root = Path(os.path.expanduser(root_text))
        return root / (self.name or default_name)
