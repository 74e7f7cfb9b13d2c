"""Ray Tune's example programs (``tune/examples/tune_basic_example.py``,
``async_hyperband_example.py``, ``pbt_function.py``, the getting-started and key-concepts
pages) and the search-space and experiment tests of ``test_api.py`` / ``test_sample.py``,
rewritten as small Ray scripts with only the imports changed."""

from __future__ import annotations

import importlib
import itertools
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_config

import actorrt as ray
from actorrt import tune
from actorrt.tune.schedulers import ASHAScheduler, PopulationBasedTraining
from actorrt.tune.search import BasicVariantGenerator


def easy_objective(config: dict[str, Any]) -> None:
    """tune_basic_example.py's objective: a loss falling with the steps."""
    width, height = config["width"], config["height"]
    for step in range(config["steps"]):
        loss = (0.1 + width * step / 100) ** (-1) + height * 0.1
        if config["activation"] == "tanh":
            loss -= 1
        tune.report({"iterations": step, "mean_loss": loss})


def test_tune_basic_example(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        easy_objective,
        tune_config=tune.TuneConfig(metric="mean_loss", mode="min", num_samples=2),
        run_config=run_config(tmp_path, stop={"training_iteration": 5}),
        param_space={
            "steps": 100,
            "width": tune.uniform(0, 20),
            "height": tune.uniform(-100, 100),
            "activation": tune.grid_search(["relu", "tanh"]),
        },
    ).fit()
    assert len(grid) == 4 and grid.num_errors == 0
    assert sorted(r.config["activation"] for r in grid) == ["relu", "relu", "tanh", "tanh"]
    assert {r.metrics["training_iteration"] for r in grid} == {5}
    best = grid.get_best_result()  # the TuneConfig's metric and mode
    assert best.metrics["mean_loss"] == min(r.metrics["mean_loss"] for r in grid)
    assert all(0 <= r.config["width"] < 20 and -100 <= r.config["height"] < 100 for r in grid)


def accuracy_climbs(config: dict[str, Any]) -> None:
    accuracy = 0.0
    for _ in range(8):
        accuracy += config["lr"]
        tune.report({"mean_accuracy": accuracy})


def test_asha_stops_the_worse_trials_early(ray_start_2_cpus: None, tmp_path: Any) -> None:
    # The getting-started tutorial: ASHA with the metric in TuneConfig. One trial at a
    # time, best first, so every later trial falls below the first rung's cut.
    grid = tune.Tuner(
        accuracy_climbs,
        param_space={"lr": tune.grid_search([0.4, 0.3, 0.2, 0.1])},
        tune_config=tune.TuneConfig(
            metric="mean_accuracy", mode="max", max_concurrent_trials=1,
            scheduler=ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2),
        ),
        run_config=run_config(tmp_path),
    ).fit()
    assert grid.num_errors == 0
    iterations = {r.config["lr"]: r.metrics["training_iteration"] for r in grid}
    assert iterations[0.4] == 8
    assert all(iterations[lr] < 8 for lr in (0.3, 0.2, 0.1)), iterations
    assert grid.get_best_result().config["lr"] == 0.4


def test_stop_on_a_metric_threshold(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        accuracy_climbs, param_space={"lr": tune.grid_search([0.1, 0.25])},
        run_config=run_config(tmp_path, stop={"mean_accuracy": 0.5, "training_iteration": 100}),
    ).fit()
    stopped = {r.config["lr"]: r.metrics["training_iteration"] for r in grid}
    assert stopped == {0.1: 5, 0.25: 2}


def pbt_objective(config: dict[str, Any]) -> None:
    step = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(f"{d}/step.txt") as f:
            step = int(f.read())
    while step < 6:
        step += 1
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.txt"), "w") as f:
                f.write(str(step))
            tune.report({"mean_accuracy": config["lr"] * step, "lr": config["lr"]},
                        checkpoint=tune.Checkpoint.from_directory(d))


def test_pbt_function_example(ray_start_2_cpus: None, tmp_path: Any) -> None:
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2,
        hyperparam_mutations={"lr": tune.uniform(0.0001, 0.02)},
    )
    grid = tune.Tuner(
        pbt_objective,
        param_space={"lr": tune.grid_search([0.001, 0.01])},
        tune_config=tune.TuneConfig(metric="mean_accuracy", mode="max", scheduler=pbt),
        run_config=run_config(
            tmp_path, checkpoint_config=tune.CheckpointConfig(num_to_keep=2)
        ),
    ).fit()
    assert grid.num_errors == 0, grid.errors
    assert all(r.checkpoint is not None for r in grid)
    assert max(r.metrics["training_iteration"] for r in grid) >= 6


def report_config(config: dict[str, Any]) -> None:
    tune.report({"seen": 1})


def test_grid_times_num_samples_and_nested_spaces(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        report_config,
        param_space={
            "model": {"layers": [tune.choice([16, 32]), 8],
                      "act": tune.grid_search(["relu", "gelu"])},
            "opt": tune.grid_search([{"name": "sgd", "lr": 0.1}, {"name": "adam", "lr": 0.01}]),
            "seed": tune.randint(0, 1000),
            "fixed": "kept",
        },
        tune_config=tune.TuneConfig(num_samples=2),
        run_config=run_config(tmp_path),
    ).fit()
    assert len(grid) == 2 * 2 * 2
    combos = [(r.config["model"]["act"], r.config["opt"]["name"]) for r in grid]
    assert set(combos) == set(itertools.product(["relu", "gelu"], ["sgd", "adam"]))
    assert all(combos.count(c) == 2 for c in set(combos))
    for result in grid:
        layers = result.config["model"]["layers"]
        assert layers[0] in (16, 32) and layers[1] == 8
        assert 0 <= result.config["seed"] < 1000 and result.config["fixed"] == "kept"
    df = grid.get_dataframe()
    assert "config/model/act" in df and "config/opt/name" in df


def test_points_to_evaluate_run_first(ray_start_2_cpus: None, tmp_path: Any) -> None:
    grid = tune.Tuner(
        report_config,
        param_space={"a": tune.randint(0, 5), "b": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(
            num_samples=3, search_alg=BasicVariantGenerator(points_to_evaluate=[{"a": 7}])
        ),
        run_config=run_config(tmp_path),
    ).fit()
    assert grid[0].config["a"] == 7 and 0 <= grid[0].config["b"] < 1
    assert all(0 <= r.config["a"] < 5 for r in list(grid)[1:])


def timed(config: dict[str, Any]) -> None:
    start = time.time()
    tune.report({"start": start, "step": 0})
    time.sleep(0.2)  # the work being timed, not ordering
    tune.report({"start": start, "end": time.time(), "step": 1})


def assert_one_at_a_time(grid: tune.ResultGrid) -> None:
    assert grid.num_errors == 0, grid.errors
    spans = sorted((r.metrics["start"], r.metrics["end"]) for r in grid)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def test_max_concurrent_trials_and_resources(ray_start_2_cpus: None, tmp_path: Any) -> None:
    space = {"i": tune.grid_search([0, 1, 2])}
    assert_one_at_a_time(tune.Tuner(
        timed, param_space=space,
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=run_config(tmp_path, "limit"),
    ).fit())
    assert_one_at_a_time(tune.Tuner(
        tune.with_resources(timed, {"cpu": 2}), param_space=space,
        run_config=run_config(tmp_path, "cpus"),
    ).fit())


def test_custom_resources(tmp_path: Any) -> None:
    ray.init(num_cpus=2, resources={"hw": 1})
    try:
        grid = tune.run(timed, config={"i": tune.grid_search([0, 1])},
                        resources_per_trial={"cpu": 1, "hw": 1},
                        storage_path=str(tmp_path), verbose=0)
        results = list(grid.results.values())
        spans = sorted((r["start"], r["end"]) for r in results)
        assert spans[0][1] <= spans[1][0]
    finally:
        ray.shutdown()


def forever(config: dict[str, Any]) -> None:
    for i in itertools.count():
        tune.report({"i": i})
        time.sleep(0.05)


def test_time_budget_ends_the_experiment(ray_start_2_cpus: None, tmp_path: Any) -> None:
    start = time.monotonic()
    grid = tune.Tuner(
        forever, param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(time_budget_s=1.5),
        run_config=run_config(tmp_path),
    ).fit()
    took = time.monotonic() - start
    assert 1.5 <= took < 30  # the budget is honoured, then the experiment ends
    assert grid.num_errors == 0, grid.errors
    # A trial that got to report before the budget ran out keeps what it reported.
    assert all(r.metrics.get("training_iteration", 1) >= 1 for r in grid)


def test_init_twice_and_is_initialized() -> None:
    assert not ray.is_initialized()
    ray.init(num_cpus=1)
    try:
        assert ray.is_initialized()
        with pytest.raises(RuntimeError):
            ray.init(num_cpus=1)
        ray.init(num_cpus=1, ignore_reinit_error=True)
        assert ray.cluster_resources()["CPU"] == 1
    finally:
        ray.shutdown()
    assert not ray.is_initialized()


def test_cloud_storage_path_is_refused_clearly(tmp_path: Any) -> None:
    # Out of scope on one machine: a clear error at the call, not a local "s3:" folder.
    refused = r"(?s)storage_path='s3://bucket/exp'.*porting"
    with pytest.raises(ValueError, match=refused):
        tune.Tuner(report_config, run_config=tune.RunConfig(storage_path="s3://bucket/exp"))
    with pytest.raises(ValueError, match=refused):
        ray.train.RunConfig(storage_path="s3://bucket/exp")
    with pytest.raises(ValueError, match=refused):
        tune.run(report_config, storage_path="s3://bucket/exp", verbose=0)
    with pytest.raises(ValueError, match="gs://b/exp"):
        tune.Tuner.restore("gs://b/exp", trainable=report_config)
    with pytest.raises(ValueError, match="gs://b/exp"):
        tune.ExperimentAnalysis("gs://b/exp")
    assert not any("s3:" in p.name for p in tmp_path.parent.iterdir())


def test_a_trial_asking_for_missing_gpus_errors_at_once(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    # Ray leaves such a trial pending (an autoscaler might add a node); there is none here.
    grid = tune.Tuner(tune.with_resources(report_config, {"gpu": 1}),
                      run_config=run_config(tmp_path)).fit()
    assert grid.num_errors == 1
    assert "GPU" in str(grid.errors[0])


def test_result_constants_name_the_fields(ray_start_2_cpus: None, tmp_path: Any) -> None:
    from actorrt.tune.result import MEAN_ACCURACY, TIME_TOTAL_S, TRAINING_ITERATION

    grid = tune.Tuner(
        accuracy_climbs, param_space={"lr": 0.1},
        run_config=run_config(tmp_path, stop={TRAINING_ITERATION: 3}),
    ).fit()
    assert grid[0].metrics[TRAINING_ITERATION] == 3
    assert grid[0].metrics[MEAN_ACCURACY] == pytest.approx(0.3)
    assert TIME_TOTAL_S in grid[0].metrics


@pytest.mark.parametrize(
    ("module", "hint"),
    [
        ("actorrt.tune.integration.keras", "tune.report"),
        ("actorrt.data", "Ray Data"),
        ("actorrt.tune.no_such_module", "ray.tune.no_such_module"),
    ],
)
def test_a_ray_module_actorrt_lacks_says_so(module: str, hint: str) -> None:
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module(module)
    assert hint in str(caught.value) and "docs/porting.md" in str(caught.value)
    # `from actorrt.tune import <missing name>` stays Python's plain ImportError.
    with pytest.raises(ImportError, match="cannot import name"):
        from actorrt.tune import register_actor  # noqa: F401


def test_a_file_uri_storage_path_is_the_local_folder(tmp_path: Path) -> None:
    from actorrt import tune

    config = tune.RunConfig(storage_path=f"file://{tmp_path}")
    assert config.storage_path == str(tmp_path)
