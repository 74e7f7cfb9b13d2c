"""Ray's ``ray.tune.search.search_generator``: ``SearchGenerator``, a ``Searcher`` wrapped
as Ray's older ``SearchAlgorithm`` interface took it."""

from __future__ import annotations

import copy
from typing import Any

from ..experiment.experiment import Experiment
from ..experiment.trial import Trial
from ._by_hand import TrialMaker, convert_to_experiment_list, merge_constants, resolved_vars_of
from .repeater import warn_num_samples
from .search_algorithm import SearchAlgorithm
from .searcher import Searcher
from .util import set_search_properties_compatibly

__all__ = ["SearchGenerator"]


class SearchGenerator(SearchAlgorithm):
    """Wraps ``searcher`` (``SearchGenerator(OptunaSearch(...))``); given as
    ``TuneConfig(search_alg=...)`` or ``tune.run(search_alg=...)``, the searcher it wraps
    is the one that runs.

    Driven by hand as in Ray: ``add_configurations(experiment)`` (one experiment), then
    ``next_trial()`` asks the searcher for a config and makes it a ``Trial`` (the
    suggestion over the experiment's constant config values), ``None`` while the searcher
    says "not now"; ``is_finished()`` once ``num_samples`` trials are made or the searcher
    said it is finished.
    """

    def __init__(self, searcher: Searcher) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(
                f"SearchGenerator() takes a tune Searcher, got {type(searcher).__name__}: "
                f"{searcher!r}"
            )
        self.searcher = searcher
        self._experiment: Experiment | None = None
        self._maker: TrialMaker | None = None
        self._counter = 0
        self._total_samples = 0
        self._finished = False

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    @property
    def total_samples(self) -> int:
        """The experiment's ``num_samples`` (0 before ``add_configurations``)."""
        return self._total_samples

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        return bool(set_search_properties_compatibly(
            self.searcher.set_search_properties, metric, mode, config, **spec
        ))

    def add_configurations(self, experiments: Any) -> None:
        """Take the one experiment to make trials for (Ray's ``add_configurations``)."""
        if self._experiment is not None:
            raise ValueError("SearchGenerator.add_configurations: an experiment was added "
                             "already; a SearchGenerator makes the trials of one")
        listed = convert_to_experiment_list(experiments)
        if len(listed) != 1:
            raise ValueError(
                f"SearchGenerator takes one experiment at a time, got {len(listed)}"
            )
        self._experiment = listed[0]
        self._maker = TrialMaker(self._experiment, prefix=Trial.generate_id()[:5])
        self._total_samples = int(self._experiment.spec.get("num_samples", 1))
        warn_num_samples(self.searcher, self._total_samples)

    def next_trial(self) -> Trial | None:
        """The searcher's next trial, or None (not now, or finished)."""
        if self.is_finished() or self._maker is None or self._experiment is None:
            return None
        trial_id = Trial.generate_id()
        suggested = self.searcher.suggest(trial_id)
        if suggested == Searcher.FINISHED:
            self._finished = True
            return None
        if not isinstance(suggested, dict):
            return None
        self._counter += 1
        config = merge_constants(self._experiment.spec["config"], copy.deepcopy(suggested))
        self._maker.counter = self._counter
        return self._maker.make(config, resolved_vars_of(suggested), trial_id=trial_id)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Pass a trial's result on to the searcher."""
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Pass a trial's end on to the searcher (by keyword, as Ray does)."""
        self.searcher.on_trial_complete(trial_id=trial_id, result=result, error=error)

    def is_finished(self) -> bool:
        return self._counter >= self._total_samples or self._finished

    def get_state(self) -> dict[str, Any]:
        return {"counter": self._counter, "total_samples": self._total_samples,
                "finished": self._finished, "experiment": self._experiment}

    def set_state(self, state: dict[str, Any]) -> None:
        self._counter = state["counter"]
        self._total_samples = state["total_samples"]
        self._finished = state["finished"]
        self._experiment = state["experiment"]
        if self._experiment is not None:
            self._maker = TrialMaker(self._experiment, start=self._counter)

    def __repr__(self) -> str:
        return f"SearchGenerator({self.searcher!r})"
