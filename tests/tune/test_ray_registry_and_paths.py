"""Ray's trainable registry, ``Experiment`` / ``run_experiments``, ``SearchGenerator`` and
the module paths of Ray 2.x and Train V2 that programs and Ray's own tests import."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from actorrt import train, tune


def scored(config):
    for i in range(3):
        tune.report({"score": config["x"] + i})


def test_a_registered_name_runs_in_tuner_and_tune_run(tmp_path: Path) -> None:
    tune.register_trainable("scored", scored)
    grid = tune.Tuner(
        "scored",
        param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="reg", verbose=0),
    ).fit()
    assert sorted(r.metrics["score"] for r in grid) == [3, 4]
    analysis = tune.run("scored", config={"x": 5}, storage_path=str(tmp_path), verbose=0)
    assert analysis.trials[0].last_result["score"] == 7
    from actorrt.tune.registry import get_trainable_cls

    assert get_trainable_cls("scored") is scored


def test_an_unknown_name_and_bad_registrations_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="no trainable is registered as 'nope'"):
        tune.Tuner("nope")
    with pytest.raises(TypeError, match="takes a function or a Trainable subclass, got int"):
        tune.register_trainable("bad", 3)
    with pytest.raises(NotImplementedError, match="RLlib is not provided"):
        tune.register_env("CartPole", lambda cfg: None)


def test_an_experiment_runs_with_its_own_settings(tmp_path: Path) -> None:
    experiment = tune.Experiment(
        "exp", scored, config={"x": tune.grid_search([0, 10])},
        stop={"training_iteration": 2}, storage_path=str(tmp_path),
    )
    assert experiment.spec["stop"] == {"training_iteration": 2}
    analysis = tune.run(experiment, verbose=0)
    assert sorted(t.last_result["score"] for t in analysis.trials) == [1, 11]
    assert Path(analysis.experiment_path).name == "exp"


def test_run_experiments_takes_specs_and_says_they_run_in_turn(tmp_path: Path) -> None:
    specs = {
        "one": {"run": scored, "config": {"x": 1}, "storage_path": str(tmp_path)},
        "two": {"run": scored, "config": {"x": 2}, "storage_path": str(tmp_path)},
    }
    with pytest.warns(UserWarning, match="run one after another"):
        trials = tune.run_experiments(specs, verbose=0)
    assert sorted(t.last_result["score"] for t in trials) == [3, 4]
    with pytest.raises(ValueError, match="unknown spec key"):
        tune.run_experiments({"bad": {"run": scored, "configs": {}}})


def test_a_search_generator_runs_the_searcher_it_wraps(tmp_path: Path) -> None:
    from actorrt.tune.search.basic_variant import BasicVariantGenerator
    from actorrt.tune.search.search_generator import SearchGenerator

    searcher = BasicVariantGenerator()
    config = tune.TuneConfig(search_alg=SearchGenerator(searcher), num_samples=2)
    assert config.search_alg is searcher
    with pytest.raises(TypeError, match="takes a tune Searcher"):
        SearchGenerator("random")


def test_ray_2x_and_train_v2_paths_hold_the_same_objects() -> None:
    from actorrt.air import config as air_config
    from actorrt.air import constants
    from actorrt.train import constants as train_constants
    from actorrt.train.v2.api import config as v2_config
    from actorrt.train.v2.api.data_parallel_trainer import DataParallelTrainer
    from actorrt.train.v2.api.exceptions import TrainingFailedError, WorkerGroupError
    from actorrt.train.v2.api.result import Result
    from actorrt.train.v2.torch import TorchTrainer
    from actorrt.tune.search.util import logger

    assert air_config.RunConfig is v2_config.RunConfig is train.RunConfig
    assert air_config.ScalingConfig is train.ScalingConfig
    assert DataParallelTrainer is train.DataParallelTrainer and Result is train.Result
    assert TrainingFailedError is train.TrainingFailedError
    assert WorkerGroupError is train.WorkerGroupError
    assert TorchTrainer is train.torch.TorchTrainer
    assert constants.TRAINING_ITERATION == "training_iteration"
    assert train_constants.CHECKPOINT_DIR_NAME == "checkpoint_dir_name"
    assert logger.name.startswith("actorrt.tune")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        absent = r"ray\.train\.v2\.api\.report_config.*porting"
        with pytest.raises(ModuleNotFoundError, match=absent):
            import actorrt.train.v2.api.report_config  # noqa: F401
    from actorrt.train.v2.api.callback import UserCallback

    assert UserCallback is train.UserCallback
