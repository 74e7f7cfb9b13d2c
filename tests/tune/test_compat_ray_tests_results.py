"""Ray Tune's own public-API tests for results (``test_result_grid.py``,
``test_experiment_analysis.py``, ``test_tuner.py``), rewritten as Ray scripts with only the
imports changed: ``ResultGrid``, ``Result``, ``ExperimentAnalysis`` and the ``Tuner``
calls around them, asserting what Ray documents."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from typing import Any

import pandas as pd
import pytest
from conftest import run_config

from actorrt import tune
from actorrt.tune import ExperimentAnalysis


def report_x_twice(config: dict[str, Any]) -> None:
    for _ in range(2):
        tune.report({"x": config["x"]})


def report_nested_param(config: dict[str, Any]) -> None:
    for factor in (1, 4, 3):
        tune.report({"metric": config["nested"]["param"] * factor})


def report_nothing(config: dict[str, Any]) -> None:
    pass


def checkpoint_every_step(config: dict[str, Any]) -> None:
    for step in range(config.get("steps", 3)):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.txt"), "w") as f:
                f.write(str(step))
            tune.report({"x": config["x"], "step": step},
                        checkpoint=tune.Checkpoint.from_directory(d))


def read_step(checkpoint: tune.Checkpoint) -> int:
    with checkpoint.as_directory() as d, open(os.path.join(d, "step.txt")) as f:
        return int(f.read())


def test_best_result_picks_the_trial_and_its_config(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(report_x_twice, param_space={"x": tune.grid_search([1, 2])},
                      run_config=run_config(tmp_path)).fit()
    best = grid.get_best_result(metric="x", mode="max")
    assert best.config["x"] == 2 and best.metrics["x"] == 2
    assert grid.get_best_result(metric="x", mode="min").config["x"] == 1
    # Ray keeps the config in the metrics too, and every report in the dataframe.
    assert best.metrics["config"] == best.config
    assert isinstance(best.metrics_dataframe, pd.DataFrame)
    assert len(best.metrics_dataframe) == 2
    assert best.checkpoint is None and best.error is None
    assert os.path.isdir(best.path)


def test_best_result_needs_metric_and_mode_unless_one_trial(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    grid = tune.Tuner(report_x_twice, param_space={"x": tune.grid_search([1, 2])},
                      run_config=run_config(tmp_path, "two")).fit()
    with pytest.raises(ValueError):
        grid.get_best_result()
    with pytest.raises(ValueError):
        grid.get_best_result(metric="x")
    with pytest.raises(ValueError):
        grid.get_best_result(mode="max")
    with pytest.raises(ValueError):
        grid.get_best_result(metric="x", mode="maximum")
    one = tune.Tuner(report_x_twice, param_space={"x": 5},
                     tune_config=tune.TuneConfig(num_samples=1),
                     run_config=run_config(tmp_path, "one")).fit()
    assert one.get_best_result().config == {"x": 5}


def test_best_result_when_no_trial_reported_the_metric(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    grid = tune.Tuner(report_nothing, param_space={"x": tune.grid_search([1, 2])},
                      run_config=run_config(tmp_path)).fit()
    with pytest.raises(RuntimeError, match="No best trial found"):
        grid.get_best_result(metric="x", mode="max")


def test_result_grid_dataframe_last_and_best_rows(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(report_nested_param,
                      param_space={"nested": {"param": tune.grid_search([1, 2])}},
                      run_config=run_config(tmp_path)).fit()
    assert len(grid) == 2
    assert sorted(grid.get_dataframe()["metric"]) == [3, 6]  # the last report
    assert sorted(grid.get_dataframe(filter_metric="metric", filter_mode="max")["metric"]) == [4, 8]
    df = grid.get_dataframe(filter_metric="metric", filter_mode="min")
    assert sorted(df["metric"]) == [1, 2]
    assert sorted(df["config/nested/param"]) == [1, 2]


def test_best_result_scopes_and_nan(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        for value in config["values"]:
            tune.report({"score": value})

    grid = tune.Tuner(
        trainable,
        param_space={"values": tune.grid_search([[9, 1], [3, 4], [float("nan")] * 2])},
        run_config=run_config(tmp_path),
    ).fit()
    last = grid.get_best_result("score", "max")  # "last" by default; NaN left out
    assert last.config["values"] == [3, 4]
    assert grid.get_best_result("score", "max", scope="all").config["values"] == [9, 1]
    assert grid.get_best_result("score", "max", scope="avg").config["values"] == [9, 1]
    assert grid.get_best_result("score", "min").config["values"] == [9, 1]
    assert grid.get_best_result("score", "min", scope="last-5-avg").config["values"] == [3, 4]
    with pytest.raises(ValueError):
        grid.get_best_result("score", "max", scope="first")


def test_errors_and_counts(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        tune.report({"x": 1})
        if config["fail"]:
            raise ValueError("this trial fails")

    grid = tune.Tuner(trainable, param_space={"fail": tune.grid_search([True, False, True])},
                      run_config=run_config(tmp_path)).fit()
    assert grid.num_errors == 2 and grid.num_terminated == 1
    assert len(grid.errors) == 2
    # Ray's error is an instance of the trainable's own exception type.
    assert all(isinstance(e, ValueError) for e in grid.errors)
    failed = [r for r in grid if r.error is not None]
    assert len(failed) == 2 and all("this trial fails" in str(r.error) for r in failed)


def test_result_repr_leaves_out_automatic_keys(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        tune.report({"loss": 1})

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2])},
                      run_config=run_config(tmp_path)).fit()
    text = repr(grid[0])
    assert "loss" in text
    for key in ("time_this_iter_s", "time_total_s", "pid", "hostname", "timestamp",
                "iterations_since_restore", "date"):
        assert key not in text, (key, text)


def test_checkpoints_kept_and_best_checkpoint(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        checkpoint_every_step,
        param_space={"x": tune.grid_search([1, 3]), "steps": 4},
        run_config=run_config(
            tmp_path, checkpoint_config=tune.CheckpointConfig(num_to_keep=2)
        ),
    ).fit()
    best = grid.get_best_result(metric="x", mode="max")
    assert best.metrics["x"] == 3
    assert isinstance(best.checkpoint, tune.Checkpoint)
    assert read_step(best.checkpoint) == 3  # the latest
    assert [metrics["step"] for _, metrics in best.best_checkpoints] == [2, 3]
    for checkpoint, metrics in best.best_checkpoints:
        assert read_step(checkpoint) == metrics["step"]
    low = best.get_best_checkpoint(metric="step", mode="min")
    assert low is not None and read_step(low) == 2


def test_results_after_the_experiment_folder_moved(ray_start_2_cpus: None, tmp_path: Any) -> None:
    tune.Tuner(
        checkpoint_every_step,
        param_space={"x": 1, "steps": 3},
        run_config=run_config(tmp_path / "ray_results", "exp_dir"),
    ).fit()
    shutil.move(str(tmp_path / "ray_results"), str(tmp_path / "moved_ray_results"))
    moved = str(tmp_path / "moved_ray_results" / "exp_dir")

    grid = tune.Tuner.restore(moved, trainable=checkpoint_every_step).get_results()
    assert "moved_ray_results" in grid[0].checkpoint.path
    assert read_step(grid[0].checkpoint) == 2
    assert len(grid[0].best_checkpoints) == 3
    analysis = ExperimentAnalysis(moved)
    assert analysis.get_best_config(metric="x", mode="max") == {"x": 1, "steps": 3}
    last = analysis.get_last_checkpoint()
    assert last is not None and "moved_ray_results" in last.path


def test_experiment_analysis_of_a_folder(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(report_nested_param,
                      param_space={"nested": {"param": tune.grid_search([1, 2, 3])}},
                      run_config=run_config(tmp_path)).fit()
    analysis = ExperimentAnalysis(grid.experiment_path, default_metric="metric",
                                  default_mode="max")
    assert analysis.best_config == {"nested": {"param": 3}}
    assert analysis.best_result["metric"] == 9
    assert len(analysis.trials) == 3
    assert all(len(df) == 3 for df in analysis.trial_dataframes.values())
    assert sorted(analysis.dataframe(metric="metric", mode="max")["metric"]) == [4, 8, 12]
    assert analysis.get_best_config(metric="metric", mode="min", scope="all") == {
        "nested": {"param": 1}
    }
    assert len(analysis.get_all_configs()) == 3


def test_tuner_get_results_before_fit_and_bad_param_space(tmp_path: Any) -> None:
    tuner = tune.Tuner(report_x_twice, param_space={"x": 1}, run_config=run_config(tmp_path))
    with pytest.raises(RuntimeError):
        tuner.get_results()
    with pytest.raises(ValueError, match="param_space"):
        tune.Tuner(report_x_twice, param_space=[{"x": 1}])  # type: ignore[arg-type]


def test_nested_and_infinite_metrics_reach_the_dataframe(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    def trainable(config: dict[str, Any]) -> None:
        tune.report({"info": {"a": 1, "b": {"c": 2}}, "big": float("inf")})

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1])},
                      run_config=run_config(tmp_path)).fit()
    result = grid[0]
    assert result.metrics["info"] == {"a": 1, "b": {"c": 2}}
    assert math.isinf(result.metrics["big"])
    df = grid.get_dataframe()
    assert df["info/a"].tolist() == [1] and df["info/b/c"].tolist() == [2]
    assert result.metrics_dataframe["info/b/c"].tolist() == [2]


def test_result_from_a_trial_folder(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        checkpoint_every_step(config)
        if config["x"] == 2:
            raise ValueError("two fails")

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2]), "steps": 2},
                      run_config=run_config(tmp_path)).fit()
    for fitted in grid:
        loaded = tune.Result.from_path(fitted.path)
        assert loaded.config == fitted.config
        assert loaded.metrics["step"] == 1 and loaded.metrics["config"] == fitted.config
        assert loaded.checkpoint is not None and read_step(loaded.checkpoint) == 1
        assert len(loaded.best_checkpoints) == 2
        assert len(loaded.metrics_dataframe) == 2
    failed = tune.Result.from_path(next(r.path for r in grid if r.error is not None))
    assert isinstance(failed.error, tune.TuneError) and "two fails" in str(failed.error)
    with pytest.raises(ValueError, match="not a trial folder"):
        tune.Result.from_path(grid.experiment_path)
