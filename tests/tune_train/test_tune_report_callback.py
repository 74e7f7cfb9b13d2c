"""Ray Train V2's ``TuneReportCallback``: a trainer's fit() inside a Tune trial, its rank
0's reports reaching the trial with ``checkpoint_path``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from actorrt import train, tune
from actorrt.tune.integration.ray_train import CHECKPOINT_PATH_KEY, TuneReportCallback


def loop(config: dict[str, Any]) -> None:
    for step in range(3):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step").write_text(str(step))
            rank = train.get_context().get_world_rank()
            train.report({"step": step, "rank": rank, "lr": config["lr"]},
                         checkpoint=train.Checkpoint.from_directory(folder))


def trial(config: dict[str, Any]) -> None:
    trainer = train.DataParallelTrainer(
        loop,
        train_loop_config={"lr": config["lr"]},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(callbacks=[TuneReportCallback()]),
    )
    trainer.fit()


def test_the_trial_gets_rank_0s_metrics_with_the_checkpoint_path(tmp_path: Path) -> None:
    grid = tune.Tuner(
        tune.with_resources(trial, lambda config: train.ScalingConfig(num_workers=2)),
        param_space={"lr": tune.grid_search([0.1])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="cb", verbose=0),
    ).fit()
    [result] = grid
    assert result.error is None, result.error
    history = result.metrics_dataframe
    assert list(history["step"]) == [0, 1, 2] and set(history["rank"]) == {0}
    last = Path(result.metrics[CHECKPOINT_PATH_KEY])
    assert last.is_dir() and (last / "step").read_text() == "2"
