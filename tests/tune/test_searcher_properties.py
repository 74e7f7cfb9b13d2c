"""How searchers get the experiment's properties, as in Ray: one built with its space,
metric and mode suggests without a Tuner, and a custom searcher written for an older
``set_search_properties(metric, mode, config)`` still runs, with a warning to update it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.search import Searcher
from actorrt.tune.search.basic_variant import BasicVariantGenerator
from actorrt.tune.search.hyperopt import HyperOptSearch


def test_a_library_searcher_given_everything_suggests_at_once() -> None:
    searcher = HyperOptSearch(
        space={"x": tune.uniform(0, 1)}, metric="loss", mode="min", random_state_seed=1
    )
    config = searcher.suggest("t1")
    assert isinstance(config, dict) and 0 <= config["x"] <= 1
    bare = HyperOptSearch(space={"x": tune.uniform(0, 1)})
    with pytest.raises(RuntimeError, match="before set_search_properties"):
        bare.suggest("t1")  # no metric nor mode: Ray's would not suggest either


class OldSearcher(Searcher):
    def __init__(self) -> None:
        super().__init__(metric="score", mode="max")
        self.told: list[str] = []
        self.made = 0

    def set_search_properties(self, metric, mode, config):  # Ray 1.x's signature
        self.config = config
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.made == 2:
            return Searcher.FINISHED
        self.made += 1
        return {"x": self.made}

    def on_trial_complete(self, trial_id: str, result=None, **kwargs: Any) -> None:
        self.told.append(trial_id)


def _score(config: dict[str, Any]) -> None:
    tune.report({"score": config["x"]})


def test_a_searcher_with_the_old_signature_runs_and_is_told_to_update(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    searcher = OldSearcher()
    with caplog.at_level(logging.WARNING, logger="actorrt.tune.search"):
        tune.run(_score, config={"x": 0}, search_alg=searcher, num_samples=2,
                 storage_path=str(tmp_path), verbose=0)
    assert len(searcher.told) == 2 and searcher.config == {"x": 0}
    assert "def set_search_properties(metric, mode, config, **spec) -> bool" in caplog.text


def test_basic_variant_counts_its_total_samples() -> None:
    searcher = BasicVariantGenerator()
    searcher.set_search_properties(None, None, {"a": tune.grid_search([1, 2, 3])},
                                   num_samples=2)
    assert searcher.total_samples == 6
