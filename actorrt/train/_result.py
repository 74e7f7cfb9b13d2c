"""What ``fit()`` returns, and the error a failed run carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._checkpoint import Checkpoint


class TrainingFailedError(RuntimeError):
    """A run ended because its workers failed more often than ``FailureConfig`` allows.

    ``__cause__`` is the last failure: the training function's exception, or the
    ``actorrt.ActorDiedError`` of a worker whose process died.
    """


@dataclass
class Result:
    """The outcome of a run.

    Attributes:
        metrics: the last metrics rank 0 reported (``{}`` if none).
        checkpoint: the latest checkpoint rank 0 reported, or ``None``.
        path: the run's folder (checkpoints, ``result.json`` with every report).
        error: ``None``, or a ``TrainingFailedError`` when the run failed beyond
            ``FailureConfig.max_failures`` (``fit()`` returns it rather than raising).
        metrics_history: every report of rank 0, in order.
        best_checkpoints: the kept checkpoints with their metrics, best first (by
            ``checkpoint_score_attribute``; newest first without one).
        num_failures: how many times the gang failed and was restarted (or gave up).
        failures: a one-line description of each failure, in order.
    """

    metrics: dict[str, Any]
    checkpoint: Checkpoint | None
    path: Path
    error: BaseException | None = None
    metrics_history: list[dict[str, Any]] = field(default_factory=list)
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    num_failures: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def metrics_dataframe(self) -> Any:
        """Every report of rank 0 as a ``pandas.DataFrame`` (needs pandas)."""
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        return pd.DataFrame(self.metrics_history)

    def __repr__(self) -> str:
        error = f", error={self.error!r}" if self.error is not None else ""
        return (
            f"Result(metrics={self.metrics!r}, checkpoint={self.checkpoint!r}, "
            f"path={str(self.path)!r}, num_failures={self.num_failures}{error})"
        )
