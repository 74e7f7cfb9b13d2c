"""``LoggerCallback``: the base of the callbacks that write each trial's results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..callback import Callback

if TYPE_CHECKING:
    from ..experiment.trial import Trial

__all__ = ["LoggerCallback"]


class LoggerCallback(Callback):
    """A callback that logs each trial's life (Ray Tune's ``LoggerCallback``).

    Override :meth:`log_trial_start`, :meth:`log_trial_result` and :meth:`log_trial_end`
    rather than the ``on_trial_*`` hooks, which call them. They run where every callback
    runs (the driver's event loop); one that raises is reported and the experiment goes on.
    """

    def log_trial_start(self, trial: Trial) -> None:
        """A trial started running (once per trial; a retry is not a new start)."""

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        """A trial reported ``result`` (a copy, with ``config``)."""

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        """A trial ended; ``failed``: with an error."""

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_start(trial)

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[str, Any],
        **info: Any,
    ) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.log_trial_end(trial, failed=True)
