"""What Ray Tune's ``ResultGrid``, ``Result`` and ``Checkpoint`` give a ported script that
builds, prints or questions them: Ray's ``ResultGrid(experiment_analysis=...)``, the reprs
Ray prints, a grid of one trial answering any ``get_best_result``, and the error of
``Result.get_best_checkpoint`` for a metric no checkpoint was reported with."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
from conftest import run_config

from actorrt import tune
from actorrt.tune import ExperimentAnalysis
from actorrt.tune.result_grid import ResultGrid


def report_score(config: dict[str, Any]) -> None:
    tune.report({"score": config["x"]})


def checkpoint_twice(config: dict[str, Any]) -> None:
    for step in range(2):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.txt"), "w") as f:
                f.write(str(step))
            tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(d))


def test_result_grid_from_experiment_analysis_keyword(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    grid = tune.Tuner(report_score, param_space={"x": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(metric="score", mode="max"),
                      run_config=run_config(tmp_path)).fit()
    analysis = ExperimentAnalysis(grid.experiment_path, default_metric="score",
                                  default_mode="max")
    by_keyword = ResultGrid(experiment_analysis=analysis)
    assert len(by_keyword) == 2
    assert by_keyword.experiment_path == grid.experiment_path
    assert by_keyword.get_best_result().config == {"x": 2}  # the analysis' defaults

    class OnlyTrials:  # Ray's ResultGrid reads nothing but ``trials`` to build itself
        trials = analysis.trials

    duck = ResultGrid(experiment_analysis=OnlyTrials())
    assert [r.config for r in duck] == [r.config for r in by_keyword]
    assert duck.experiment_path == grid.experiment_path

    class NoTrials:
        trials: list[Any] = []

    assert len(ResultGrid(experiment_analysis=NoTrials())) == 0
    with pytest.raises(ValueError, match="one of the two"):
        ResultGrid(grid._results, grid.experiment_path, experiment_analysis=analysis)
    with pytest.raises(ValueError, match="one of the two"):
        ResultGrid()


def test_reprs_are_rays(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        tune.report({"loss": float(config["x"])})
        if config["x"] == 2:
            raise RuntimeError("second fails")

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2])},
                      run_config=run_config(tmp_path)).fit()
    first, second = grid[0], grid[1]
    assert repr(grid) == (
        "ResultGrid<[\n"
        "  Result(\n"
        "    metrics={'loss': 1.0},\n"
        f"    path={first.path!r},\n"
        "    filesystem='local',\n"
        "    checkpoint=None\n"
        "  ),\n"
        "  Result(\n"
        "    error='RuntimeError',\n"
        "    metrics={'loss': 2.0},\n"
        f"    path={second.path!r},\n"
        "    filesystem='local',\n"
        "    checkpoint=None\n"
        "  )\n"
        "]>"
    )
    assert repr(first).startswith("Result(\n  metrics={'loss': 1.0")
    assert repr(first).endswith("\n  checkpoint=None\n)")
    assert repr(tune.Checkpoint("/tmp/ckpt1")) == "Checkpoint(filesystem=local, path=/tmp/ckpt1)"


def test_one_trial_is_the_best_whatever_is_asked(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(report_score, param_space={"x": 5},
                      run_config=run_config(tmp_path)).fit()
    # Ray returns a grid's only trial before looking at metric, mode or what it reported.
    assert grid.get_best_result(metric="score", mode="max").config == {"x": 5}
    assert grid.get_best_result(metric="never_reported", mode="min").config == {"x": 5}
    assert grid.get_best_result(metric="score").config == {"x": 5}


def test_best_checkpoint_of_an_unreported_metric_is_a_runtime_error(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    grid = tune.Tuner(checkpoint_twice, run_config=run_config(tmp_path)).fit()
    result = grid[0]
    assert result.get_best_checkpoint("step", "min") is not None
    with pytest.raises(RuntimeError, match="accuracy"):
        result.get_best_checkpoint("accuracy", "max")
    with pytest.raises(ValueError):
        result.get_best_checkpoint("step", "maximum")
