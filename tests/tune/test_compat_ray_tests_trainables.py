"""Ray Tune's own public-API tests for trainables (``test_function_api.py``,
``test_trainable.py``, ``test_api.py``, ``test_tuner_restore.py``), rewritten as Ray
scripts with only the imports changed: function and class trainables, checkpoints,
retries, the trial context and restoring an experiment."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import run_config

import actorrt as ray
from actorrt import tune
from actorrt.tune import Checkpoint


def dict_checkpoint(data: dict[str, Any]) -> Checkpoint:
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump(data, f)
    return Checkpoint.from_directory(folder)


def load_dict(checkpoint: Checkpoint) -> dict[str, Any]:
    with checkpoint.as_directory() as folder, open(os.path.join(folder, "data.json")) as f:
        return dict(json.load(f))


def retrying(config: dict[str, Any]) -> None:
    """Fails once at step 5 (a marker file says it already did), resuming from its
    checkpoint when Tune restarts it."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        start = load_dict(checkpoint)["step"] + 1
    for step in range(start, 10):
        if step == 5 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("try to fail me")
        tune.report({"step": step}, checkpoint=dict_checkpoint({"step": step}))


def test_function_retried_from_its_checkpoint(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        retrying,
        param_space={"marker": str(tmp_path / "failed-once")},
        run_config=run_config(tmp_path, failure_config=tune.FailureConfig(max_failures=3)),
    ).fit()
    assert grid.num_errors == 0
    result = grid[0]
    assert result.metrics["step"] == 9
    assert result.metrics["training_iteration"] == 10  # Ray counts across the restart
    assert load_dict(result.checkpoint)["step"] == 9
    # Ray's progress file holds every result, from both attempts.
    assert result.metrics_dataframe["step"].tolist() == list(range(10))


def test_function_without_retries_errors(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(retrying, param_space={"marker": str(tmp_path / "m")},
                      run_config=run_config(tmp_path)).fit()
    assert grid.num_errors == 1
    assert isinstance(grid[0].error, RuntimeError)
    assert grid[0].metrics["step"] == 4
    assert load_dict(grid[0].checkpoint)["step"] == 4


def test_automatic_result_fields(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        for i in range(3):
            tune.report({"mean_loss": 1.0 / (i + 1)})

    grid = tune.Tuner(trainable, param_space={"a": 1},
                      run_config=run_config(tmp_path)).fit()
    metrics = grid[0].metrics
    for key in ("training_iteration", "time_this_iter_s", "time_total_s", "timestamp",
                "trial_id", "pid", "hostname", "date", "time_since_restore",
                "iterations_since_restore", "done", "config"):
        assert key in metrics, key
    assert metrics["training_iteration"] == 3 and metrics["iterations_since_restore"] == 3
    assert metrics["done"] is True
    frame = grid[0].metrics_dataframe
    assert frame["training_iteration"].tolist() == [1, 2, 3]
    assert (frame["time_total_s"].diff().dropna() >= 0).all()


def test_trial_context(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        context = tune.get_context()
        tune.report({
            "name": context.get_trial_name(),
            "id": context.get_trial_id(),
            "experiment": context.get_experiment_name(),
            "cpus": context.get_trial_resources().required_resources.get("CPU"),
        })

    def name_of(trial: Any) -> str:
        return f"trial_{trial.config['x']}"

    grid = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(trial_name_creator=name_of),
        run_config=run_config(tmp_path, "ctx"),
    ).fit()
    assert grid.num_errors == 0, grid.errors
    assert sorted(r.metrics["name"] for r in grid) == ["trial_1", "trial_2"]
    assert all(r.metrics["id"] == r.metrics["trial_id"] for r in grid)
    assert {r.metrics["experiment"] for r in grid} == {"ctx"}
    assert {r.metrics["cpus"] for r in grid} == {1}


class Counter(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.count = config.get("start", 0)
        self.fail_at = config.get("fail_at")
        self.marker = config.get("marker")

    def step(self) -> dict[str, Any]:
        self.count += 1
        if self.count == self.fail_at and not os.path.exists(self.marker or ""):
            open(self.marker or "", "w").close()
            raise RuntimeError("fail once")
        # Ray takes a checkpoint after an iteration whose result says should_checkpoint.
        return {"count": self.count, "done": self.count >= 6,
                "should_checkpoint": self.count == self.config.get("checkpoint_at")}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | None:
        with open(os.path.join(checkpoint_dir, "count.txt"), "w") as f:
            f.write(str(self.count))
        return None

    def load_checkpoint(self, checkpoint: Any) -> None:
        with open(os.path.join(checkpoint, "count.txt")) as f:
            self.count = int(f.read())


def test_class_trainable_runs_until_done(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        Counter,
        param_space={"start": tune.grid_search([0, 3])},
        run_config=run_config(
            tmp_path, checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)
        ),
    ).fit()
    assert grid.num_errors == 0, grid.errors
    assert sorted(r.metrics["training_iteration"] for r in grid) == [3, 6]
    for result in grid:
        assert result.metrics["count"] == 6
        assert result.checkpoint is not None
        with result.checkpoint.as_directory() as d, open(os.path.join(d, "count.txt")) as f:
            assert f.read() == "6"


def test_class_trainable_restored_after_a_failure(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        Counter,
        param_space={"fail_at": 4, "marker": str(tmp_path / "failed")},
        run_config=run_config(
            tmp_path,
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit()
    assert grid.num_errors == 0, grid.errors
    assert grid[0].metrics["count"] == 6
    assert grid[0].metrics_dataframe["count"].tolist() == [1, 2, 3, 4, 5, 6]


def test_should_checkpoint_in_a_step_result(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(Counter, param_space={"checkpoint_at": 2},
                      run_config=run_config(tmp_path)).fit()
    assert grid.num_errors == 0, grid.errors
    assert grid[0].checkpoint is not None
    with grid[0].checkpoint.as_directory() as d, open(os.path.join(d, "count.txt")) as f:
        assert f.read() == "2"


def test_class_trainable_used_directly(tmp_path: Any) -> None:
    # Ray's test_trainable.py drives a Trainable by hand: train(), save(), restore().
    trainable = Counter(config={"start": 1})
    first = trainable.train()
    assert first["count"] == 2 and first["training_iteration"] == 1
    saved = trainable.save(str(tmp_path / "ckpt"))
    trainable.train()
    trainable.restore(saved)
    assert trainable.train()["count"] == 3
    trainable.stop()


def test_checkpoint_object(tmp_path: Any) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "weights.txt").write_text("w")
    checkpoint = Checkpoint.from_directory(str(folder))
    assert checkpoint.path == str(folder)
    copied = checkpoint.to_directory(str(tmp_path / "copy"))
    assert Path(copied, "weights.txt").read_text() == "w"
    with checkpoint.as_directory() as d:
        assert os.listdir(d) == ["weights.txt"]
    checkpoint.set_metadata({"epoch": 1})
    checkpoint.update_metadata({"loss": 0.5})
    assert Checkpoint.from_directory(str(folder)).get_metadata() == {"epoch": 1, "loss": 0.5}
    # Ray's train.Checkpoint has the same methods.
    train_checkpoint = ray.train.Checkpoint.from_directory(str(folder))
    assert train_checkpoint.get_metadata() == {"epoch": 1, "loss": 0.5}


def flaky(config: dict[str, Any]) -> None:
    tune.report({"attempt": 1})
    if config["fail"] and not os.path.exists(config["marker"]):
        raise RuntimeError("errored in the first run")
    tune.report({"attempt": 2})


def test_restore_resumes_or_restarts_errored_trials(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    marker = str(tmp_path / "fixed")
    space = {"fail": tune.grid_search([False, True]), "marker": marker}
    first = tune.Tuner(flaky, param_space=space, run_config=run_config(tmp_path)).fit()
    assert first.num_errors == 1
    path = first.experiment_path
    assert tune.Tuner.restore(path, trainable=flaky).fit().num_errors == 1  # left as is

    open(marker, "w").close()
    again = tune.Tuner.restore(path, trainable=flaky, restart_errored=True).fit()
    assert again.num_errors == 0
    fixed = next(r for r in again if r.config["fail"])
    assert fixed.metrics["training_iteration"] == 2  # restarted from scratch


def test_tune_run_without_raising_on_failed_trials(ray_start_2_cpus: None, tmp_path: Any) -> None:
    def trainable(config: dict[str, Any]) -> None:
        tune.report({"x": config["x"]})
        if config["x"] == 2:
            raise ValueError("two fails")

    analysis = tune.run(trainable, config={"x": tune.grid_search([1, 2])},
                        storage_path=str(tmp_path), raise_on_failed_trial=False, verbose=0)
    assert sorted(t.status for t in analysis.trials) == ["ERROR", "TERMINATED"]
    assert analysis.get_best_config(metric="x", mode="max") == {"x": 2}
    with pytest.raises(tune.TuneError):
        tune.run(trainable, config={"x": 2}, storage_path=str(tmp_path), verbose=0)


def test_with_parameters_passes_large_objects(ray_start_2_cpus: None, tmp_path: Any) -> None:
    import numpy as np

    data = np.arange(100_000)

    def trainable(config: dict[str, Any], data: Any = None) -> None:
        tune.report({"total": int(data.sum()) * config["scale"]})

    grid = tune.Tuner(tune.with_parameters(trainable, data=data),
                      param_space={"scale": tune.grid_search([1, 2])},
                      run_config=run_config(tmp_path)).fit()
    assert sorted(r.metrics["total"] for r in grid) == [int(data.sum()), 2 * int(data.sum())]


def test_with_parameters_on_a_class_trainable(ray_start_2_cpus: None, tmp_path: Any) -> None:
    class Scaled(tune.Trainable):
        def setup(self, config: dict[str, Any], offset: int = 0) -> None:
            self.value = config["x"] + offset

        def step(self) -> dict[str, Any]:
            return {"value": self.value, "done": True}

    grid = tune.Tuner(tune.with_parameters(Scaled, offset=100), param_space={"x": 1},
                      run_config=run_config(tmp_path)).fit()
    assert grid.num_errors == 0, grid.errors
    assert grid[0].metrics["value"] == 101


def test_num_to_keep_keeps_the_best_and_the_latest(ray_start_2_cpus: None, tmp_path: Any) -> None:
    # Ray's checkpoint manager keeps the num_to_keep best by score, and never deletes the
    # latest (a retry restarts from it), so one more may stay on disk.
    def trainable(config: dict[str, Any]) -> None:
        for value in (3, 9, 1, 2):
            tune.report({"v": value}, checkpoint=dict_checkpoint({"v": value}))

    grid = tune.Tuner(trainable, run_config=run_config(
        tmp_path, checkpoint_config=tune.CheckpointConfig(
            num_to_keep=1, checkpoint_score_attribute="v", checkpoint_score_order="max"),
    )).fit()
    result = grid[0]
    assert load_dict(result.checkpoint) == {"v": 2}  # the latest
    assert [m["v"] for _, m in result.best_checkpoints] == [9, 2]
    best = result.get_best_checkpoint("v", "max")
    assert best is not None and load_dict(best) == {"v": 9}


def fails_first(config: dict[str, Any]) -> None:
    tune.report({"x": config["x"]})
    if config["x"] == 0:
        raise KeyError("the first trial fails")


def test_fail_fast_stops_or_raises(ray_start_2_cpus: None, tmp_path: Any) -> None:
    space = {"x": tune.grid_search([0, 1, 2])}
    one_at_a_time = tune.TuneConfig(max_concurrent_trials=1)
    grid = tune.Tuner(
        fails_first, param_space=space, tune_config=one_at_a_time,
        run_config=run_config(tmp_path, "fast", failure_config=tune.FailureConfig(fail_fast=True)),
    ).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 0  # nothing ran after the error
    # "raise": the trial's own exception comes out of fit(), as in Ray.
    with pytest.raises(KeyError, match="the first trial fails"):
        tune.Tuner(
            fails_first, param_space=space, tune_config=one_at_a_time,
            run_config=run_config(
                tmp_path, "raise", failure_config=tune.FailureConfig(fail_fast="raise")
            ),
        ).fit()
    with pytest.raises(KeyError, match="the first trial fails"):
        tune.run(fails_first, config=space, fail_fast="raise", max_concurrent_trials=1,
                 storage_path=str(tmp_path), verbose=0)
    with pytest.raises(ValueError, match="fail_fast must be True, False or 'raise'"):
        tune.FailureConfig(fail_fast="yes")


def test_report_outside_a_trial_is_an_error_as_documented() -> None:
    # Ray warns and drops the report; actorrt raises (docs/porting.md says why).
    with pytest.raises(RuntimeError, match="outside a Tune trial"):
        tune.report({"x": 1})
    # As in Ray, the context exists outside a trial; its getters warn and return None.
    context = tune.get_context()
    with pytest.warns(UserWarning, match="outside a Tune trial") as caught:
        assert context.get_trial_name() is None and context.get_trial_dir() is None
        assert context.get_trial_name() is None
    warned = [str(w.message) for w in caught if "outside a Tune trial" in str(w.message)]
    assert len(warned) == 2 and "get_trial_name()" in warned[0]  # once per getter
    assert tune.get_checkpoint() is None
    assert "outside a trial" in Path(__file__).parents[2].joinpath("docs", "porting.md").read_text()
