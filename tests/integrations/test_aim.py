"""Aim: one run per trial (its config as hparams, each metric's history by iteration),
closed when the trial ends, made off the controller's event loop; read back with Aim's
own ``aim.Repo``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

aim = pytest.importorskip("aim")

import actorrt  # noqa: E402
from actorrt import tune  # noqa: E402
from actorrt.tune.logger.aim import AimLoggerCallback  # noqa: E402


def steps(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"loss": config["lr"] * (3 - i), "nested": {"acc": i / 2},
                     "epoch": i, "label": "not a number"})


def histories(run: Any) -> dict[str, tuple[list[int], list[float]]]:
    out = {}
    for metric in run.metrics():
        steps, (values, *_) = metric.data.items_list()  # values, epochs, timestamps
        order = sorted(range(len(steps)), key=steps.__getitem__)
        out[metric.name] = ([steps[i] for i in order], [values[i] for i in order])
    return out


@pytest.mark.actorrt(num_cpus=2)
async def test_one_run_per_trial_with_hparams_and_metric_history(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made_on: list[threading.Thread] = []

    class RecordingRun(aim.Run):  # type: ignore[misc]
        """Aim's own Run, noting the thread that makes it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made_on.append(threading.current_thread())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(aim, "Run", RecordingRun)
    grid = await tune.Tuner(
        steps,
        param_space={"lr": tune.grid_search([0.1, 0.2]), "model": {"depth": 3}},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="aimsweep", verbose=0,
                                  callbacks=[AimLoggerCallback()]),
    ).fit_async()
    assert len(grid) == 2 and not grid.errors
    assert len(made_on) == 2
    assert all(thread is not threading.main_thread() for thread in made_on)

    repo = aim.Repo(str(tmp_path / "aimsweep"))  # the default repo: the experiment's folder
    runs = list(repo.iter_runs())
    assert len(runs) == 2
    trial_ids = {result.metrics["trial_id"] for result in grid}
    assert {run["trial_id"] for run in runs} == trial_ids
    for run in runs:
        assert run.experiment == "aimsweep"
        assert not run.active  # closed when its trial ended
        hparams = run["hparams"]
        lr = hparams["lr"]
        assert lr in (0.1, 0.2) and hparams["model/depth"] == 3
        history = histories(run)
        assert history["ray/tune/loss"] == ([1, 2, 3], pytest.approx([lr * 3, lr * 2, lr]))
        assert history["ray/tune/nested/acc"][1] == [0.0, 0.5, 1.0]
        assert "ray/tune/training_iteration" not in history
        assert "ray/tune/epoch" not in history  # Aim's epoch of each point instead
        assert "ray/tune/label" not in history
    found = repo.query_metrics("metric.name == 'ray/tune/loss' and run.hparams['lr'] == 0.2")
    assert len(list(found.iter_runs())) == 1


@pytest.mark.actorrt(num_cpus=2)
async def test_metrics_and_experiment_name_choose_what_is_tracked(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    repo_dir = tmp_path / "repo"
    callback = AimLoggerCallback(repo=str(repo_dir), experiment_name="chosen",
                                 metrics=["nested/acc"])
    grid = await tune.Tuner(
        steps,
        param_space={"lr": 0.5},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0,
                                  callbacks=[callback]),
    ).fit_async()
    assert not grid.errors
    (run,) = aim.Repo(str(repo_dir)).iter_runs()
    assert run.experiment == "chosen"
    assert set(histories(run)) == {"ray/tune/nested/acc"}


def test_bad_arguments_are_refused_where_given() -> None:
    with pytest.raises(ValueError, match=r"metrics=\[\]"):
        AimLoggerCallback(metrics=[])
    with pytest.raises(TypeError, match=r"list of result names, got 'loss'"):
        AimLoggerCallback(metrics="loss")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"folder or an aim.Repo, got 3"):
        AimLoggerCallback(repo=3)
