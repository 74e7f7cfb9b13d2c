"""LightGBM: a 2-worker LightGBMTrainer over LightGBM's network trains one model whose
checkpoint loads; an ASHA sweep with the Tune callback stops weak trials early."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

lightgbm = pytest.importorskip("lightgbm")
from sklearn.datasets import load_breast_cancer  # noqa: E402

import actorrt  # noqa: E402
from actorrt import train, tune  # noqa: E402
from actorrt.train import RunConfig, ScalingConfig  # noqa: E402
from actorrt.train.lightgbm import (  # noqa: E402
    LightGBMTrainer,
    RayTrainReportCallback,
    get_network_params,
)
from actorrt.tune.integration.lightgbm import TuneReportCheckpointCallback  # noqa: E402
from actorrt.tune.schedulers import ASHAScheduler  # noqa: E402

PARAMS = {"objective": "binary", "metric": ["binary_logloss", "binary_error"],
          "num_leaves": 7, "learning_rate": 0.3, "num_threads": 1, "verbose": -1}


def frame() -> dict[str, Any]:
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    return {"x": x[order], "y": y[order].astype(float)}


def train_fn(config: dict[str, Any]) -> None:
    shard = train.get_dataset_shard("train")
    batch = next(shard.iter_batches(batch_size=len(shard)))
    data = lightgbm.Dataset(np.asarray(batch["x"]), label=np.asarray(batch["y"]))
    network = get_network_params()
    assert network["num_machines"] == 2 and len(network["machines"].split(",")) == 2
    lightgbm.train({**config["params"], **network}, data, num_boost_round=config["rounds"],
                   valid_sets=[data], valid_names=["train"],
                   callbacks=[RayTrainReportCallback(frequency=5)])


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_two_workers_train_one_model_and_its_checkpoint_loads(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    data = frame()
    result = await LightGBMTrainer(
        train_fn,
        train_loop_config={"params": PARAMS, "rounds": 12},
        datasets={"train": data},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="lgb"),
    ).fit_async()
    assert result.error is None, result.error
    assert result.metrics["train-binary_logloss"] < 0.1
    assert len(result.best_checkpoints) == 3  # rounds 5, 10 and the end
    booster = RayTrainReportCallback.get_model(result.checkpoint)
    assert booster.current_iteration() == 12
    predicted = booster.predict(data["x"]) > 0.5
    assert (predicted == data["y"]).mean() > 0.97
    assert LightGBMTrainer.get_model(result.checkpoint).current_iteration() == 12


def sweep_trial(config: dict[str, Any]) -> None:
    data = frame()
    dtrain = lightgbm.Dataset(data["x"][:400], label=data["y"][:400])
    dvalid = lightgbm.Dataset(data["x"][400:], label=data["y"][400:], reference=dtrain)
    lightgbm.train({**PARAMS, "learning_rate": config["lr"]}, dtrain, num_boost_round=16,
                   valid_sets=[dvalid], valid_names=["valid"],
                   callbacks=[TuneReportCheckpointCallback(
                       metrics={"loss": "valid-binary_logloss"}, frequency=1)])


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_an_asha_sweep_stops_weak_trials_and_keeps_the_best_model(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        sweep_trial,
        # The strong trials run first, so the weak ones meet their results at the rungs.
        param_space={"lr": tune.grid_search([0.3, 0.5, 0.001, 0.003])},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min",
            scheduler=ASHAScheduler(max_t=16, grace_period=2, reduction_factor=2),
            max_concurrent_trials=2,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    ).fit_async()
    assert not grid.errors
    iterations = {r.config["lr"]: r.metrics["training_iteration"] for r in grid}
    assert iterations[0.3] == 16 or iterations[0.5] == 16
    assert min(iterations[0.001], iterations[0.003]) < 16
    best = grid.get_best_result()
    assert best.config["lr"] in (0.3, 0.5)
    booster = TuneReportCheckpointCallback.get_model(best.checkpoint)
    data = frame()
    assert ((booster.predict(data["x"][400:]) > 0.5) == data["y"][400:]).mean() > 0.9


def fails_on_one_rank(config: dict[str, Any]) -> None:
    shard = train.get_dataset_shard("train")
    batch = next(shard.iter_batches(batch_size=len(shard)))
    data = lightgbm.Dataset(np.asarray(batch["x"]), label=np.asarray(batch["y"]))
    rank = train.get_context().get_world_rank()

    def fail_after_two(env: Any) -> None:
        if env.iteration == 2 and rank == config["failing_rank"]:
            raise RuntimeError(f"rank {rank} fails")

    lightgbm.train({**PARAMS, **get_network_params()}, data,
                   num_boost_round=50, valid_sets=[data], valid_names=["train"],
                   callbacks=[fail_after_two, RayTrainReportCallback()])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("failing_rank", [0, 1])
@pytest.mark.actorrt(num_cpus=2)
async def test_a_rank_that_fails_mid_training_fails_the_run_without_a_hang(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, failing_rank: int
) -> None:
    started = time.monotonic()
    trainer = LightGBMTrainer(
        fails_on_one_rank,
        train_loop_config={"failing_rank": failing_rank},
        datasets={"train": frame()},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="fails"),
    )
    with pytest.raises(train.WorkerGroupError, match=f"rank {failing_rank} fails"):
        await trainer.fit_async()
    assert time.monotonic() - started < 60
