"""``Repeater``: run each config a searcher suggests several times, and tell it the mean.

The first trial of a group (its primary) is the one the wrapped searcher knows; the next
``repeat - 1`` trials get a copy of its config (with ``__trial_index__`` set to their place in
the group when ``set_index``). When every trial of the group has ended, the searcher hears of
the primary's end with the mean of the group's metric (``nan`` values left out), as Ray
Tune's ``Repeater`` does. ``TuneConfig(num_samples)`` counts every trial, repeats included.
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

from .searcher import Searcher, WrappingSearcher
from .util import set_search_properties_compatibly

__all__ = ["TRIAL_INDEX", "Repeater"]

logger = logging.getLogger("actorrt.tune")

TRIAL_INDEX = "__trial_index__"


class _Group:
    def __init__(self, primary: str, config: dict[str, Any], size: int) -> None:
        self.primary = primary
        self.config = config
        self.size = size
        self.trials: list[str] = []
        self.scores: dict[str, float] = {}
        self.error = False

    def full(self) -> bool:
        return len(self.trials) >= self.size


class Repeater(WrappingSearcher):
    """Repeat every config of ``searcher`` ``repeat`` times (Ray Tune's ``Repeater``).

    Args:
        searcher: the searcher whose configs are repeated.
        repeat: trials per config (a positive int).
        set_index: put ``__trial_index__`` (0 .. repeat-1) in each trial's config.
    """

    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True) -> None:
        super().__init__(searcher)
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be a positive int, got {repeat!r}")
        self.repeat = repeat
        self.set_index = set_index
        self._groups: list[_Group] = []
        self._of: dict[str, _Group] = {}

    def _resume_search(self, created: int, live: set[str]) -> None:
        # The wrapped searcher made one config per group, not one per trial.
        self.searcher._resume_search(len(self._groups), live)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        samples = spec.get("num_samples")
        if isinstance(samples, int):
            warn_num_samples(self, samples)
            spec = {**spec, "num_samples": -(-samples // self.repeat)}
        return set_search_properties_compatibly(
            self.searcher.set_search_properties, metric, mode, config, **spec
        )

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        group = self._groups[-1] if self._groups else None
        if group is None or group.full():
            config = self.searcher.suggest(trial_id)
            if not isinstance(config, dict):
                return config
            group = _Group(trial_id, copy.deepcopy(config), self.repeat)
            self._groups.append(group)
        config = copy.deepcopy(group.config)
        if self.set_index:
            config[TRIAL_INDEX] = len(group.trials)
        group.trials.append(trial_id)
        self._of[trial_id] = group
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        group = self._of.get(trial_id)
        if group is None or trial_id in group.scores:
            return
        metric = self.searcher.metric
        value = (result or {}).get(metric) if metric else None
        group.scores[trial_id] = (
            float(value) if isinstance(value, int | float) and not error else math.nan
        )
        group.error = group.error or error
        if len(group.scores) < group.size:
            return
        finite = [s for s in group.scores.values() if not math.isnan(s)]
        mean = sum(finite) / len(finite) if finite else math.nan
        told = {metric: mean} if metric and finite else None
        self.searcher.on_trial_complete(group.primary, result=told, error=not finite)

    def get_state(self) -> Any:
        mine = {k: v for k, v in vars(self).items() if k != "searcher"}
        return {"repeater": mine, "searcher": self.searcher.get_state()}

    def set_state(self, state: Any) -> None:
        vars(self).update(state["repeater"])
        self.searcher.set_state(state["searcher"])

    def __repr__(self) -> str:
        return f"Repeater({self.searcher!r}, repeat={self.repeat})"


def warn_num_samples(searcher: Searcher, num_samples: int) -> None:
    """Warn when ``searcher`` is a :class:`Repeater` whose ``repeat`` does not divide
    ``num_samples`` (the last config then runs fewer times)."""
    if isinstance(searcher, Repeater) and num_samples % searcher.repeat:
        logger.warning(
            "tune: num_samples=%d is not a multiple of Repeater(repeat=%d): num_samples "
            "counts every trial, repeats included, so the last config runs fewer times",
            num_samples, searcher.repeat,
        )
