"""The seed's Tune x Train sweep, undeclared and unlimited, on a cluster too small for the
drivers plus their workers: on Ray it hangs; here it ends, with a clear error for the
trials that could not get their workers and results for those that could."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import train, tune


def short_loop(config: dict[str, Any]) -> None:
    for step in range(2):
        train.report({"loss": config["lr"] / (step + 1), "step": step})


def driver(config: dict[str, Any]) -> None:
    result = train.DataParallelTrainer(
        short_loop,
        train_loop_config={"lr": config["lr"]},
        scaling_config=train.ScalingConfig(
            num_workers=config["num_workers"],
            use_gpu=True,
            resources_per_worker={"CPU": 1, "GPU": 1},  # each GPU worker needs a CPU too
        ),
    ).fit()
    if result.error is not None:
        raise result.error


@pytest.mark.actorrt(num_cpus=5, num_gpus=8)
async def test_undeclared_workers_on_a_small_cluster_end_in_a_deadlock_error_not_a_hang(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Four trials take a CPU each at once; every trainer then wants 2 or 4 more CPUs, and
    # one is free. Each deadlock error gives a CPU back, until a gang fits.
    grid = await tune.Tuner(
        driver,
        param_space={
            "num_workers": tune.choice([2, 4]),
            "lr": tune.grid_search([0.001, 0.01]),
            "batch_size": tune.grid_search([32, 64]),
        },
        tune_config=tune.TuneConfig(seed=3),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert len(grid) == 4
    assert grid.errors, "the cluster was too small for every gang: some trial must be told"
    for error in grid.errors:
        assert isinstance(error, actorrt.ResourceDeadlockError)
        assert "with_resources" in str(error) and "PlacementGroupFactory" in str(error)
    finished = [r for r in grid if r.error is None]
    assert finished, "once the others gave their CPUs back, some gang must have run"
    for result in finished:
        assert result.metrics["training_iteration"] == 2 and result.metrics["step"] == 1
    assert actorrt.available_resources() == actorrt.cluster_resources()
