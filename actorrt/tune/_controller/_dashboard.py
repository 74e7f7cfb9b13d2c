"""An experiment's trials as the dashboard shows them: a ``SweepSource`` over the
controller's own trials while ``fit()`` runs, their last state once it ends. Registered
only where this process serves a dashboard."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actorrt.dashboard import register_sweep, serving

if TYPE_CHECKING:
    from ..experiment.trial import Trial
    from ._controller_state import ControllerState

__all__ = ["LiveSweep"]


class LiveSweep:
    """The dashboard's view of one run of an experiment (``actorrt.dashboard.SweepSource``)."""

    def __init__(self, controller: ControllerState) -> None:
        self._controller: ControllerState | None = controller
        self._final: list[dict[str, Any]] = []
        self.name = controller.name
        self.path = controller.storage.path
        self.metric = controller.tune_config.metric
        self.mode = controller.tune_config.mode
        self.key = register_sweep(self) if serving() else None

    @property
    def running(self) -> bool:
        return self._controller is not None

    def ended(self) -> None:
        """The run ended: keep its trials' last state, not the controller."""
        if self._controller is not None and self.key is not None:
            self._final = [_row(t) for t in self._controller.trials]
        self._controller = None

    async def trials(self) -> list[dict[str, Any]]:
        if self._controller is None:
            return self._final
        return [_row(t) for t in self._controller.trials]


def _row(trial: Trial) -> dict[str, Any]:
    error = trial.error_text.strip().splitlines()[-1] if trial.error_text.strip() else None
    return {
        "name": trial.trial_name,
        "id": trial.trial_id,
        "status": trial.status.lower(),
        "config": trial.config,
        "path": trial.path,
        "last_result": trial.last_result,
        "num_results": trial.num_results,
        "error": error,
    }
