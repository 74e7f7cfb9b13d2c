"""Ray Train V2's user callbacks: ``UserCallback`` hooks that a trainer calls in the
calling process (the driver) after each report and after workers fail, with the run's
``TrainRunContext``. Passed as ``RunConfig(callbacks=[...])``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._shared._checkpoint import Checkpoint


@dataclass(frozen=True)
class TrainRunContext:
    """What a training run was given (Ray Train V2's ``TrainRunContext``).

    Attributes:
        run_id: a unique id of this ``fit()``.
        run_config, train_loop_config, scaling_config, backend_config, datasets: the
            trainer's.
        dataset_config: Ray Data's; always ``None`` here.
    """

    run_config: Any
    train_loop_config: dict[str, Any] | None
    scaling_config: Any
    backend_config: Any
    datasets: dict[str, Any]
    dataset_config: Any = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def get_run_config(self) -> Any:
        """The run's ``RunConfig``."""
        return self.run_config


class UserCallback:
    """Hooks a trainer calls in the calling process, never in the workers (Ray Train
    V2's ``ray.train.UserCallback``). An exception in a hook ends ``fit()`` with a
    ``ControllerError``."""

    def before_run(self, run_context: TrainRunContext) -> None:
        """Called once when ``fit()`` starts, before any worker does."""

    def after_run(self, run_context: TrainRunContext, result: Any) -> None:
        """Called once when ``fit()`` ends, with the run's ``Result`` (its ``error`` set
        when training failed), before ``fit()`` returns or raises."""

    def after_report(
        self,
        run_context: TrainRunContext,
        metrics: list[dict[str, Any]],
        checkpoint: Checkpoint | None,
    ) -> None:
        """Called once every worker has made a ``train.report`` call (and its checkpoint
        is stored).

        Args:
            run_context: the run's context.
            metrics: each worker's metrics of this report, ``metrics[rank]``.
            checkpoint: the stored checkpoint (the report's folder, with every rank's
                files), or ``None`` when no worker reported one.
        """

    def after_exception(
        self, run_context: TrainRunContext, worker_exceptions: dict[int, Exception]
    ) -> None:
        """Called when workers of an attempt have failed.

        Args:
            run_context: the run's context.
            worker_exceptions: each failed worker's world rank and exception.
        """


def user_callbacks(callbacks: Any) -> list[UserCallback]:
    """The ``UserCallback`` instances among ``RunConfig(callbacks=...)`` (the others are
    Tune's, for a Tuner)."""
    return [c for c in callbacks or () if isinstance(c, UserCallback)]


def for_trial(
    callbacks: list[UserCallback],
) -> Callable[[dict[str, Any], str | None], dict[str, Any]] | None:
    """What an enclosing trial gets of each report: each callback that has a
    ``metrics_for_trial(metrics, checkpoint_path)`` shapes it in turn; ``None`` when none
    does."""
    shapers = [c.metrics_for_trial for c in callbacks if hasattr(c, "metrics_for_trial")]
    if not shapers:
        return None

    def shape(metrics: dict[str, Any], checkpoint: str | None) -> dict[str, Any]:
        for shaper in shapers:
            metrics = shaper(metrics, checkpoint)
        return metrics

    return shape
