"""The settings that apply to each trial on its own: ``FailureConfig`` (how a failed trial is
retried) and ``CheckpointConfig`` (which checkpoints it takes and keeps).

They refer to nothing else in tune, so :class:`._trial.Trial` and everything above it can use
them; ``RunConfig`` (in :mod:`._config`) holds one of each.
"""

from __future__ import annotations

import dataclasses

__all__ = ["CheckpointConfig", "FailureConfig"]


@dataclasses.dataclass
class FailureConfig:
    """What to do when a trial fails.

    Attributes:
        max_failures: retries per trial, from its last checkpoint (``-1``: no limit). A
            trial whose error is a resource configuration error (``ResourceDeadlockError``,
            ``InfeasibleResourceError``) is never retried: it would fail the same way.
        fail_fast: stop the whole experiment at the first trial error; ``"raise"``: and
            then make ``fit()`` raise that trial's exception (Ray's ``"raise"``).
    """

    max_failures: int = 0
    fail_fast: bool | str = False

    def __post_init__(self) -> None:
        value = self.max_failures
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise ValueError(f"max_failures must be an int >= -1, got {value!r}")
        if self.fail_fast not in (True, False, "raise"):
            raise ValueError(
                f"fail_fast must be True, False or 'raise', got {self.fail_fast!r}"
            )


@dataclasses.dataclass
class CheckpointConfig:
    """Which checkpoints to take and keep.

    Attributes:
        num_to_keep: keep this many best per trial (``None``: all); the latest is also
            kept (one more), since a retry restarts from it, as in Ray.
        checkpoint_score_attribute: rank checkpoints by this metric for deletion (default:
            by age).
        checkpoint_score_order: ``"max"`` or ``"min"``: which scores are better.
        checkpoint_frequency: class trainables: checkpoint every N iterations (``0``: never).
        checkpoint_at_end: class trainables: checkpoint when the trial ends.
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and (
            isinstance(self.num_to_keep, bool)
            or not isinstance(self.num_to_keep, int)
            or self.num_to_keep < 1
        ):
            raise ValueError(
                f"num_to_keep must be None or a positive int, got {self.num_to_keep!r}"
            )
        if self.checkpoint_score_order not in ("max", "min"):
            order = self.checkpoint_score_order
            raise ValueError(f"checkpoint_score_order must be 'max' or 'min', got {order!r}")
        if self.checkpoint_frequency < 0:
            raise ValueError(
                f"checkpoint_frequency must be >= 0, got {self.checkpoint_frequency!r}"
            )
