"""What ``Tuner()`` does before ``fit()``, as Ray's does at construction.

- The trainable must pickle: it is sent to every trial's worker process, and a trainable
  that cannot travel (it holds a lock, an open file, a client) fails here, at the line
  that made the Tuner, rather than in every trial.
- ``CheckpointConfig(checkpoint_frequency/checkpoint_at_end)`` with a function trainable is
  refused (when ``fit()`` starts, as in Ray).
- The experiment's folder is created and its definition (``tuner.pkl``) written, with an
  empty journal, so ``Tuner.can_restore(path)`` is true from construction on (Ray writes its
  experiment state at construction too). A folder whose journal already holds an
  experiment is left as it is: that experiment stays restorable, and ``fit()`` warns
  before it starts a new one there.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

import cloudpickle

from ..._shared._storage_path import ensure_experiment_dir
from ..trainable._resources import is_function_trainable
from ..tune_config import CheckpointConfig, RunConfig, TuneConfig
from ._experiment_state import JOURNAL_FILE, make_header, write_header

__all__ = [
    "DEFAULT_STORAGE",
    "check_checkpoint_config",
    "check_picklable",
    "experiment_name",
    "prepare_experiment",
    "trainable_name",
]

DEFAULT_STORAGE = os.path.join("~", "actorrt_results")


def trainable_name(trainable: Any) -> str:
    name = getattr(trainable, "__name__", None) or type(trainable).__name__
    return str(name)


def experiment_name(trainable: Any, run_config: RunConfig) -> str:
    """``RunConfig(name)``, or the trainable's name and the time, as Ray names it."""
    return run_config.name or f"{trainable_name(trainable)}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"


def check_checkpoint_config(trainable: Any, config: CheckpointConfig | None) -> None:
    """Ray's rule: a function trainable takes its checkpoints itself (``tune.report(...,
    checkpoint=...)``), so ``checkpoint_frequency`` and ``checkpoint_at_end`` are errors.

    Raises:
        ValueError: either is set for a function trainable.
    """
    if config is None or not is_function_trainable(trainable):
        return
    for name in ("checkpoint_frequency", "checkpoint_at_end"):
        value = getattr(config, name)
        if value:
            raise ValueError(
                f"CheckpointConfig({name}={value!r}) is not supported for a function "
                "trainable (as in Ray): it takes its checkpoints itself. Report one every N "
                "iterations, or at the end, with tune.report(metrics, "
                "checkpoint=tune.Checkpoint.from_directory(...)); checkpoint_frequency and "
                "checkpoint_at_end apply to tune.Trainable classes"
            )


def check_picklable(trainable: Any) -> None:
    """Raises ``TypeError`` when ``trainable`` cannot be sent to a worker process."""
    try:
        cloudpickle.dumps(trainable)
    except Exception as exc:
        raise TypeError(
            f"the trainable {trainable_name(trainable)!r} cannot be pickled, so it cannot "
            f"be sent to the trials' worker processes: {type(exc).__name__}: {exc}. Create "
            "what it holds (locks, open files, clients, ...) inside the trainable, or pass "
            "it with tune.with_parameters"
        ) from exc


def prepare_experiment(
    trainable: Any, param_space: dict[str, Any], tune_config: TuneConfig, run_config: RunConfig
) -> tuple[str, str]:
    """Create the experiment's folder and write its header; return its name and tag."""
    name = experiment_name(trainable, run_config)
    tag = secrets.token_hex(3)[:5]
    root = os.path.abspath(os.path.expanduser(run_config.storage_path or DEFAULT_STORAGE))
    path = os.path.join(root, name)
    # Only this user may read or change it: it holds pickles (params.pkl, tuner.pkl) that
    # a restore loads, so a link or a folder someone else made or can write is refused.
    ensure_experiment_dir(path)
    journal = os.path.join(path, JOURNAL_FILE)
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        return name, tag  # an earlier experiment's: fit() warns, then starts anew
    header = make_header(trainable_name(trainable), tag, param_space, tune_config, run_config)
    write_header(path, header)
    with open(journal, "a", encoding="utf-8"):
        pass
    return name, tag
