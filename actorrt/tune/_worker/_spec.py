"""What crosses between the controller and a trial's process for one attempt: the
:class:`TrialSpec` it starts from and the :class:`Outcome` it ends with."""

from __future__ import annotations

import dataclasses
import traceback
from enum import StrEnum
from typing import Any

import cloudpickle

import actorrt

__all__ = ["Ended", "Outcome", "TrialSpec", "error_outcome", "is_config_error"]


@dataclasses.dataclass(frozen=True, slots=True)
class TrialSpec:
    """One attempt at a trial, as the controller hands it to the trial's actor."""

    trial_id: str
    trial_name: str
    experiment_name: str
    trial_dir: str
    config: dict[str, Any]
    bundles: list[dict[str, float]]
    strategy: str
    checkpoint_frequency: int = 0  # a class trainable saves every N iterations (0: never)
    checkpoint_at_end: bool = False
    checkpoint_count: int = 0  # the index of the attempt's first checkpoint folder
    chdir: bool = True  # run in the trial's folder (RUN_CONFIG / RAY_CHDIR_TO_TRIAL_DIR)
    checkpoint: str | None = None  # the checkpoint the attempt resumes from
    iteration: int = 0  # the training_iteration it resumes at
    time_total_s: float = 0.0
    resized: bool = False  # its first attempt with new resources (update_resources)
    # How many reports may go ahead of their decisions (0: each waits, as in Ray; see
    # Session.send): more than 0 only where no scheduler or stop criterion decides on them.
    reports_ahead: int = 0


class Ended(StrEnum):
    """How an attempt ended."""

    DONE = "done"  # the trainable returned (or reported done)
    STOPPED = "stopped"  # it was told to stop
    ERROR = "error"  # it raised


@dataclasses.dataclass(slots=True)
class Outcome:
    """How an attempt ended; an error as data, so that any exception, even one whose class
    the controller cannot import, reaches it with its traceback."""

    ended: Ended
    error: bytes | None = None  # the exception, pickled when it could be
    error_type: str = ""
    error_text: str = ""  # the exception with its traceback
    config_error: bool = False  # the trial's resources are declared wrongly: no retry
    exception: BaseException | None = None  # the exception itself, on the controller's side

    def load_error(self) -> BaseException | None:
        """The exception, when it can be rebuilt here (else ``None``)."""
        if self.exception is not None:
            return self.exception
        if self.error is None:
            return None
        try:
            error = cloudpickle.loads(self.error)
        except Exception:  # its class is not importable here: the text stands in for it
            return None
        return error if isinstance(error, BaseException) else None


def is_config_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) says the trial's resources are declared wrongly:
    retrying cannot help, so such a trial is not retried."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, actorrt.ResourceDeadlockError | actorrt.InfeasibleResourceError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def error_outcome(exc: BaseException, *, config_error: bool = False) -> Outcome:
    """An exception as an error :class:`Outcome`: pickled when it can be, always with its
    traceback text."""
    try:
        blob: bytes | None = cloudpickle.dumps(exc)
    except Exception:
        blob = None
    return Outcome(
        Ended.ERROR,
        error=blob,
        error_type=type(exc).__name__,
        error_text="".join(traceback.format_exception(exc)),
        config_error=config_error or is_config_error(exc),
    )
