"""W&B: one offline run per trial with its config, metrics and exit state, checkpoints as
artifacts, and setup_wandb in trials and Train workers, read back from W&B's offline files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("wandb")

from sweep_trainables import steps
from wandb_offline_files import offline_runs

import actorrt
from actorrt import train, tune
from actorrt.air.integrations.wandb import WandbLoggerCallback, setup_wandb
from actorrt.train import DataParallelTrainer, ScalingConfig


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_PROJECT", "WANDB_PROJECT_NAME", "WANDB_API_KEY", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_one_offline_run_per_trial_with_config_metrics_and_exit_code(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    callback = WandbLoggerCallback(project="sweeps", excludes=["secret"],
                                   upload_checkpoints=True)
    grid = await tune.Tuner(
        steps,
        param_space={"lr": tune.grid_search([0.1, 0.3])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="wb", verbose=0,
                                  callbacks=[callback]),
    ).fit_async()
    assert len(grid) == 2 and len(grid.errors) == 1
    runs = offline_runs(tmp_path / "wb")
    assert len(runs) == 2
    for run in runs:
        lr = run.config["lr"]
        assert run.project == "sweeps" and run.group == "wb"
        assert run.run_id.endswith(("_00000", "_00001")) and run.name.startswith("steps_")
        assert run.exit_code == (1 if lr > 0.25 else 0)
        losses = [h["loss"] for h in run.history]
        assert losses == pytest.approx([lr * 3, lr * 2, lr])
        assert [h["training_iteration"] for h in run.history] == [1, 2, 3]
        assert all("secret" not in h and "config.lr" not in h for h in run.history)
        assert run.config["trial_id"] == run.run_id
        assert run.artifacts == [f"checkpoint_{run.name}"]


def logs_with_setup(config: dict[str, Any]) -> None:
    run = setup_wandb(config, project="inside")
    for i in range(2):
        run.log({"score": config["x"] + i})
    run.finish()
    tune.report({"steps": 2})


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_setup_wandb_in_a_trial_names_the_run_after_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        logs_with_setup,
        param_space={"x": tune.grid_search([1, 5])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="su", verbose=0),
    ).fit_async()
    assert not grid.errors
    runs = offline_runs(tmp_path / "su")
    assert sorted(r.config["x"] for r in runs) == [1, 5]
    for run in runs:
        x = run.config["x"]
        assert run.project == "inside" and run.group == "su"
        assert run.name.startswith("logs_with_setup_")
        assert [h["score"] for h in run.history] == [x, x + 1]


def worker_logs(config: dict[str, Any]) -> None:
    run = setup_wandb(config, project="train", dir=config["dir"], name="fit")
    run.log({"rank": train.get_context().get_world_rank()})
    run.finish()
    train.report({"ok": 1})


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_setup_wandb_in_a_train_gang_logs_from_rank_zero_only(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    result = await DataParallelTrainer(
        worker_logs,
        train_loop_config={"dir": str(tmp_path / "runs")},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="gang"),
    ).fit_async()
    assert result.error is None
    runs = offline_runs(tmp_path / "runs")
    assert [(r.name, [h["rank"] for h in r.history]) for r in runs] == [("fit", [0])]


def test_a_project_is_required_and_one_api_key_source() -> None:
    with pytest.raises(ValueError, match="needs a W&B project"):
        WandbLoggerCallback()
    with pytest.raises(ValueError, match="api_key or api_key_file, not both"):
        WandbLoggerCallback(project="p", api_key="k", api_key_file="f")
    with pytest.raises(ValueError, match="'/nonexistent/key' cannot be read"):
        WandbLoggerCallback(project="p", api_key_file="/nonexistent/key")
    with pytest.raises(ValueError, match="upload_timeout must be a positive number.*got -1"):
        WandbLoggerCallback(project="p", upload_timeout=-1)
