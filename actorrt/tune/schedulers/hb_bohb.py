"""HyperBand as BOHB runs it: Ray Tune's ``HyperBandForBOHB``."""

from __future__ import annotations

from typing import Any

from ..experiment.trial import PAUSED
from .hyperband import HyperBandScheduler, _Bracket

__all__ = ["HyperBandForBOHB"]


class HyperBandForBOHB(HyperBandScheduler):
    """HyperBand as BOHB runs it (Ray Tune's ``HyperBandForBOHB``), for
    :class:`~actorrt.tune.search.bohb.TuneBOHB`.

    The differences from :class:`HyperBandScheduler`: a band makes its brackets from the
    most aggressive (``s = s_max``, the most trials, the lowest first milestone) down; a
    bracket halves only once it is full (its trials wait, paused, for the rest to be made);
    and the result at each milestone carries ``hyperband_info = {"budget": milestone}``,
    which TuneBOHB's model records as that result's budget.
    """

    def _bracket_s(self, made: int) -> int:
        return self.s_max_1 - made - 1

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        result["hyperband_info"] = {}
        return super().on_trial_result(controller, trial, result)

    def _at_milestone(
        self, controller: Any, bracket: _Bracket, trial: Any, result: dict[str, Any], sign: float
    ) -> str:
        result["hyperband_info"]["budget"] = bracket.milestone
        others_paused = all(
            bracket.trials[t].status == PAUSED for t in bracket.live if t != trial.trial_id
        )
        if not bracket.filled() or not others_paused:
            return self.PAUSE
        return self._process(controller, bracket, sign, current=trial.trial_id)
