"""Where Ray's own tests match an error message, actorrt's message says what Ray's says
(and may say more): each ``match=`` below is Ray's wording."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actorrt import tune


def reports_x(config: dict[str, Any]) -> None:
    tune.report({"x": config["i"]})


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tune.ResultGrid:
    storage = tmp_path_factory.mktemp("messages")
    return tune.Tuner(
        reports_x,
        param_space={"i": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(storage_path=str(storage), verbose=0),
    ).fit()


def test_best_result_messages(grid: tune.ResultGrid) -> None:
    with pytest.raises(ValueError, match="No metric is provided. Either pass in a `metric` arg "
                       "to `get_best_result`"):
        grid.get_best_result()
    with pytest.raises(ValueError, match="No mode is provided. Either pass in a `mode` arg"):
        grid.get_best_result(metric="x")
    with pytest.raises(RuntimeError, match="No best trial found for the given metric: y"):
        grid.get_best_result(metric="y", mode="max")
    with pytest.raises(ValueError, match=r"If set, `mode` has to be one of \[min, max\]"):
        grid.get_best_result(metric="x", mode="best")
    assert grid.get_best_result(metric="x", mode="max").config == {"i": 2}


def test_experiment_analysis_messages(grid: tune.ResultGrid) -> None:
    analysis = tune.ExperimentAnalysis(grid.experiment_path)
    with pytest.raises(ValueError, match="No `metric` has been passed and  `default_metric` "
                       "has not been set. Please specify the `metric` parameter"):
        analysis.get_best_trial()
    with pytest.raises(ValueError, match="No `mode` has been passed and  `default_mode` has "
                       "not been set. Please specify the `mode` parameter"):
        analysis.get_best_trial("x")
    with pytest.raises(ValueError, match=r"If set, `mode` has to be one of \[min, max\]"):
        analysis.get_best_trial("x", "best")


def test_construction_messages(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="The `param_space` passed to the `Tuner` must be a "
                       "dict"):
        tune.Tuner(reports_x, param_space=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Cannot initialize a PlacementGroupFactory with "
                       "zero bundles"):
        tune.PlacementGroupFactory([])
    with pytest.raises(ValueError, match="must be callable with either 0 or 1 parameters"):
        tune.sample_from(lambda a, b: a)
    with pytest.raises(ValueError, match="LogUniform requires a lower bound greater than 0"):
        tune.loguniform(0, 1)
    with pytest.raises(ValueError, match="is not divisible by quantization factor"):
        tune.quniform(0.05, 1, 0.1)
