"""LightGBM: a 2-worker LightGBMTrainer over LightGBM's network trains one model whose
checkpoint loads; an ASHA sweep with the Tune callback stops weak trials early."""

from __future__ import annotations

import time
from typing import Any

import pytest

lightgbm = pytest.importorskip("lightgbm")
from boosting_data import (  # noqa: E402
    ROUNDS,
    assert_predicts,
    frame,
    split,
    sweep_gangs,
    whole_shard,
)

import actorrt  # noqa: E402
from actorrt import train, tune  # noqa: E402
from actorrt.train import RunConfig, ScalingConfig  # noqa: E402
from actorrt.train.lightgbm import (  # noqa: E402
    LightGBMTrainer,
    RayTrainReportCallback,
    get_network_params,
)
from actorrt.tune.integration.lightgbm import (  # noqa: E402
    TuneReportCallback,
    TuneReportCheckpointCallback,
)
from actorrt.tune.schedulers import ASHAScheduler  # noqa: E402

PARAMS = {"objective": "binary", "metric": ["binary_logloss", "binary_error"],
          "num_leaves": 7, "learning_rate": 0.3, "num_threads": 1, "verbose": -1}


def train_fn(config: dict[str, Any]) -> None:
    x, y = whole_shard("train")
    data = lightgbm.Dataset(x, label=y)
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


def gang_trial(config: dict[str, Any]) -> None:
    x, y = whole_shard("train")
    dtrain = lightgbm.Dataset(x, label=y)
    x, y = whole_shard("valid")
    dvalid = lightgbm.Dataset(x, label=y, reference=dtrain)
    lightgbm.train({**PARAMS, **get_network_params(), "learning_rate": config["lr"]}, dtrain,
                   num_boost_round=ROUNDS, valid_sets=[dvalid], valid_names=["valid"],
                   callbacks=[RayTrainReportCallback(frequency=1)])


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=2)
async def test_an_asha_sweep_of_two_worker_gangs_stops_weak_trials_and_keeps_the_best(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    trainer = LightGBMTrainer(gang_trial, train_loop_config={"lr": 0.3}, datasets=split(),
                              scaling_config=ScalingConfig(num_workers=2))
    best = await sweep_gangs(trainer, "lr", "valid-binary_logloss", tmp_path)
    booster = LightGBMTrainer.get_model(best.checkpoint)
    assert booster.current_iteration() == ROUNDS
    assert_predicts(booster.predict)


def cross_validates(config: dict[str, Any]) -> None:
    data = frame()
    lightgbm.cv(PARAMS, lightgbm.Dataset(data["x"], label=data["y"]), num_boost_round=3,
                nfold=2, stratified=False, callbacks=[TuneReportCallback()])


@pytest.mark.actorrt(num_cpus=1)
async def test_cross_validation_reports_each_metrics_mean_and_stdv(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    [result] = await tune.Tuner(
        cross_validates, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert result.error is None
    assert result.metrics["training_iteration"] == 3
    for metric in PARAMS["metric"]:
        mean, stdv = (result.metrics[f"valid-{metric}-{kind}"] for kind in ("mean", "stdv"))
        assert 0 <= mean < 1 and 0 <= stdv < 0.5


def trains_on(config: dict[str, Any]) -> None:
    data = frame()
    dtrain = lightgbm.Dataset(data["x"][:200], label=data["y"][:200], free_raw_data=False)
    first = lightgbm.train(PARAMS, dtrain, num_boost_round=3)
    lightgbm.train(PARAMS, dtrain, num_boost_round=3, init_model=first, valid_sets=[dtrain],
                   valid_names=["train"], callbacks=[RayTrainReportCallback(frequency=2)])


@pytest.mark.actorrt(num_cpus=1)
async def test_checkpoint_rounds_are_the_boosters_when_training_goes_on(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    # As LightGBM (and Ray) count them: trained on from 3 rounds, the reports are rounds
    # 4, 5 and 6, so frequency=2 checkpoints rounds 4 and 6 (reports 1 and 3), once each.
    [result] = await tune.Tuner(
        trains_on, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert result.error is None
    kept = sorted(m["training_iteration"] for _, m in result.best_checkpoints)
    assert kept == [1, 3]
    assert RayTrainReportCallback.get_model(result.checkpoint).current_iteration() == 6


def fails_on_one_rank(config: dict[str, Any]) -> None:
    x, y = whole_shard("train")
    data = lightgbm.Dataset(x, label=y)
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
