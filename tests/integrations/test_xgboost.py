"""XGBoost: a 2-worker XGBoostTrainer over XGBoost's collective converges and its checkpoint
loads; an ASHA sweep with the Tune callback stops weak trials and keeps the best model."""

from __future__ import annotations

import time
from typing import Any

import pytest

xgboost = pytest.importorskip("xgboost")
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
from actorrt.train.xgboost import (  # noqa: E402
    RayTrainReportCallback,
    XGBoostConfig,
    XGBoostTrainer,
)
from actorrt.tune.integration.xgboost import TuneReportCheckpointCallback  # noqa: E402
from actorrt.tune.schedulers import ASHAScheduler  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"],
          "max_depth": 3, "eta": 0.3, "nthread": 1}


def train_fn(config: dict[str, Any]) -> None:
    x, y = whole_shard("train")
    dtrain = xgboost.DMatrix(x, label=y)
    booster = xgboost.train(
        config["params"], dtrain, num_boost_round=config["rounds"],
        evals=[(dtrain, "train")], callbacks=[RayTrainReportCallback(frequency=5)],
    )
    # The collective made one model: every rank's trees are the same.
    dumps = train.collective.broadcast_from_rank_zero(len(booster.get_dump()))
    assert dumps == len(booster.get_dump())


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_two_workers_train_one_model_and_its_checkpoint_loads(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    data = frame()
    result = await XGBoostTrainer(
        train_fn,
        train_loop_config={"params": PARAMS, "rounds": 12},
        datasets={"train": data},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="xgb"),
    ).fit_async()
    assert result.error is None, result.error
    assert result.metrics["train-logloss"] < 0.1 and result.metrics["train-error"] < 0.03
    assert len(result.best_checkpoints) == 3  # rounds 5, 10 and the end
    booster = RayTrainReportCallback.get_model(result.checkpoint)
    assert booster.num_boosted_rounds() == 12
    predicted = booster.predict(xgboost.DMatrix(data["x"])) > 0.5
    assert (predicted == data["y"]).mean() > 0.97
    assert XGBoostTrainer.get_model(result.checkpoint).num_boosted_rounds() == 12


def sweep_trial(config: dict[str, Any]) -> None:
    data = frame()
    dtrain = xgboost.DMatrix(data["x"][:400], label=data["y"][:400])
    dvalid = xgboost.DMatrix(data["x"][400:], label=data["y"][400:])
    params = {**PARAMS, "eta": config["eta"], "max_depth": config["max_depth"]}
    xgboost.train(params, dtrain, num_boost_round=16, evals=[(dvalid, "valid")],
                  callbacks=[TuneReportCheckpointCallback(metrics={"loss": "valid-logloss"},
                                                          frequency=1)])


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_an_asha_sweep_stops_weak_trials_and_keeps_the_best_model(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        sweep_trial,
        # The strong trials run first, so the weak ones meet their results at the rungs.
        param_space={"eta": tune.grid_search([0.3, 0.5, 0.001, 0.003]),
                     "max_depth": 3},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min",
            scheduler=ASHAScheduler(max_t=16, grace_period=2, reduction_factor=2),
            max_concurrent_trials=2,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    ).fit_async()
    assert not grid.errors
    iterations = {r.config["eta"]: r.metrics["training_iteration"] for r in grid}
    assert iterations[0.3] == 16 or iterations[0.5] == 16  # a strong trial ran to the end
    assert min(iterations[0.001], iterations[0.003]) < 16  # a weak one was stopped early
    best = grid.get_best_result()
    assert best.config["eta"] in (0.3, 0.5)
    booster = TuneReportCheckpointCallback.get_model(best.checkpoint)
    data = frame()
    predicted = booster.predict(xgboost.DMatrix(data["x"][400:])) > 0.5
    assert (predicted == data["y"][400:]).mean() > 0.9


def gang_trial(config: dict[str, Any]) -> None:
    matrices = {name: xgboost.DMatrix(*whole_shard(name)) for name in ("train", "valid")}
    xgboost.train({**PARAMS, "eta": config["eta"]}, matrices["train"], num_boost_round=ROUNDS,
                  evals=[(matrices["valid"], "valid")],
                  callbacks=[RayTrainReportCallback(frequency=1)])


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=2)
async def test_an_asha_sweep_of_two_worker_gangs_stops_weak_trials_and_keeps_the_best(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    trainer = XGBoostTrainer(gang_trial, train_loop_config={"eta": 0.3}, datasets=split(),
                             scaling_config=ScalingConfig(num_workers=2))
    best = await sweep_gangs(trainer, "eta", "valid-logloss", tmp_path)
    booster = XGBoostTrainer.get_model(best.checkpoint)
    assert booster.num_boosted_rounds() == ROUNDS
    assert_predicts(lambda x: booster.predict(xgboost.DMatrix(x)))


def test_v1_arguments_and_bad_callback_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"label_column=.*V1"):
        XGBoostTrainer(train_fn, label_column="y")
    with pytest.raises(ValueError, match="frequency"):
        RayTrainReportCallback(frequency=-1)
    with pytest.raises(TypeError, match="metrics must be"):
        RayTrainReportCallback(metrics=3)


def fails_on_one_rank(config: dict[str, Any]) -> None:
    x, y = whole_shard("train")
    dtrain = xgboost.DMatrix(x, label=y)
    rank = train.get_context().get_world_rank()

    def boom(env: Any) -> None:
        raise RuntimeError(f"rank {rank} fails")

    class FailAfterTwo(xgboost.callback.TrainingCallback):  # type: ignore[misc]
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            if epoch == 2 and rank == config["failing_rank"]:
                boom(None)
            return False

    xgboost.train(PARAMS, dtrain, num_boost_round=50, evals=[(dtrain, "train")],
                  callbacks=[FailAfterTwo(), RayTrainReportCallback()])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("failing_rank", [0, 1])
@pytest.mark.actorrt(num_cpus=2)
async def test_a_rank_that_fails_mid_training_fails_the_run_without_a_hang(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, failing_rank: int
) -> None:
    started = time.monotonic()
    trainer = XGBoostTrainer(
        fails_on_one_rank,
        train_loop_config={"failing_rank": failing_rank},
        datasets={"train": frame()},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="fails"),
        xgboost_config=XGBoostConfig(timeout_s=60),
    )
    with pytest.raises(train.WorkerGroupError, match=f"rank {failing_rank} fails"):
        await trainer.fit_async()
    assert time.monotonic() - started < 30  # not the tracker's 60 s timeout
