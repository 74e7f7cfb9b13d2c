"""Running a sweep: from a plain script and from async code; results, files, stopping."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import time
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import tune


def quadratic(config: dict[str, Any]) -> None:
    context = tune.get_context()
    for step in range(1, 4):
        tune.report({
            "loss": (config["x"] - 2) ** 2 + config["nested"]["y"] / step,
            "trial_dir": context.get_trial_dir(),
            "cpus": context.get_trial_resources().required_resources.get("CPU", 0.0),
        })


SPACE = {"x": tune.grid_search([0, 1, 2, 3]), "nested": {"y": tune.uniform(0, 0.1)}}


def test_fit_from_a_plain_script_starts_and_stops_a_runtime(tmp_path: Any) -> None:
    assert not actorrt.is_initialized()
    grid = tune.Tuner(
        quadratic,
        param_space=SPACE,
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="script", verbose=0),
    ).fit()
    assert not actorrt.is_initialized()  # fit() started it, so fit() shut it down
    assert len(grid) == 4 and not grid.errors
    best = grid.get_best_result()
    assert best.config["x"] == 2
    assert grid.get_best_result("loss", "max").config["x"] == 0
    assert [r.metrics["training_iteration"] for r in grid] == [3, 3, 3, 3]
    assert best.metrics["trial_dir"] == best.path and best.metrics["cpus"] == 1
    assert best.metrics["config"] == best.config and best.metrics["done"] is True
    frame = grid.get_dataframe()
    assert sorted(frame["config/x"]) == [0, 1, 2, 3] and "config/nested/y" in frame
    assert len(best.metrics_dataframe) == 3
    assert grid.get_dataframe(filter_metric="loss", filter_mode="min").shape[0] == 4
    # The experiment folder, per trial: params, results as JSON lines and CSV.
    assert grid.experiment_path == os.path.join(str(tmp_path), "script")
    with open(os.path.join(best.path, "params.json")) as f:
        assert json.load(f) == best.config
    with open(os.path.join(best.path, "result.json")) as f:
        lines = [json.loads(line) for line in f]
    assert [line["training_iteration"] for line in lines] == [1, 2, 3]
    assert lines[0]["config"]["x"] == 2 and lines[0]["trial_id"] == best.trial_id
    with open(os.path.join(best.path, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [float(r["loss"]) for r in rows] == [line["loss"] for line in lines]


def test_fit_uses_the_runtime_that_init_started(tmp_path: Any) -> None:
    actorrt.init(num_cpus=2)
    try:
        grid = tune.Tuner(
            tune.with_resources(quadratic, {"cpu": 2}),
            param_space={"x": 2, "nested": {"y": 0.0}},
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit()
        assert actorrt.is_initialized()
        assert grid[0].metrics["cpus"] == 2 and grid[0].metrics["loss"] == 0
    finally:
        actorrt.shutdown()


@pytest.mark.actorrt(num_cpus=2)
async def test_fit_inside_a_running_loop_says_to_use_fit_async(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    with pytest.raises(RuntimeError, match="fit_async"):
        tune.Tuner(quadratic).fit()


def endless(config: dict[str, Any]) -> None:
    step = 0
    while True:
        step += 1
        tune.report({"step": step, "score": config["rate"] * step})
        time.sleep(0.005)  # stands for a training step


@pytest.mark.actorrt(num_cpus=4)
async def test_stop_by_dict_by_callable_and_by_time_budget(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    space = {"rate": tune.grid_search([1, 2])}
    run = {"storage_path": str(tmp_path), "verbose": 0}
    grid = await tune.Tuner(
        endless, param_space=space, run_config=tune.RunConfig(stop={"step": 3}, **run)
    ).fit_async()
    assert [r.metrics["step"] for r in grid] == [3, 3]

    def enough(trial_id: str, result: dict[str, Any]) -> bool:
        return bool(result["score"] >= 4)

    grid = await tune.Tuner(
        endless, param_space=space, run_config=tune.RunConfig(stop=enough, **run)
    ).fit_async()
    assert [r.metrics["step"] for r in grid] == [4, 2]

    started = time.monotonic()
    grid = await tune.Tuner(
        endless,
        param_space=space,
        tune_config=tune.TuneConfig(time_budget_s=1.0),
        run_config=tune.RunConfig(**run),
    ).fit_async()
    assert 1.0 <= time.monotonic() - started < 8
    assert [r.status for r in grid] == ["TERMINATED", "TERMINATED"] and not grid.errors
    assert all(r.metrics["step"] > 1 for r in grid)


@pytest.mark.actorrt(num_cpus=2)
async def test_a_missing_stop_metric_errors_the_trial(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        endless,
        param_space={"rate": 1},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0, stop={"acc": 1}),
    ).fit_async()
    [error] = grid.errors
    assert isinstance(error, ValueError) and "'acc'" in str(error)


@pytest.mark.actorrt(num_cpus=2)
async def test_progress_output_and_quiet(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    await tune.Tuner(
        quadratic,
        param_space={"x": tune.grid_search([1, 2]), "nested": {"y": 0.0}},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="loud", verbose=2),
    ).fit_async()
    out = capsys.readouterr().out
    assert out.count(" RUNNING") == 2 and out.count(" TERMINATED") >= 2
    assert "best loss=0" in out and "results in" in out
    await tune.Tuner(
        quadratic,
        param_space={"x": 1, "nested": {"y": 0.0}},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert "[tune]" not in capsys.readouterr().out


def probe_context(config: dict[str, Any]) -> None:
    tune.report({"trial_id": tune.get_context().get_trial_id(), "seed_pick": config["pick"]})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_seed_reproduces_the_configs(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    async def picks(seed: int) -> list[Any]:
        grid = await tune.Tuner(
            probe_context,
            param_space={"pick": tune.randint(0, 1_000_000)},
            tune_config=tune.TuneConfig(num_samples=3, seed=seed),
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit_async()
        assert [r.metrics["trial_id"] for r in grid] == [r.trial_id for r in grid]
        return [r.config["pick"] for r in grid]

    first = await picks(7)
    assert first == await picks(7) and first != await picks(8)


def test_report_outside_a_trial_says_where_it_belongs() -> None:
    with pytest.raises(RuntimeError, match="outside a Tune trial"):
        tune.report({"x": 1})
    assert tune.get_checkpoint() is None


async def test_cancelling_fit_async_ends_every_trial(tmp_path: Any) -> None:
    async with actorrt.Runtime(num_cpus=2):
        fit = asyncio.ensure_future(tune.Tuner(
            endless,
            param_space={"rate": tune.grid_search([1, 2, 3])},
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit_async())

        def reported() -> bool:
            return any("result.json" in files for _, _, files in os.walk(tmp_path))

        assert await eventually(reported, within=20)
        fit.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fit
        assert actorrt.available_resources()["CPU"] == 2


def _fails_at_once(config: dict[str, Any]) -> None:
    raise ValueError("no result on purpose")


@pytest.mark.actorrt(num_cpus=2)
async def test_a_trial_with_no_result_has_no_metrics_dataframe(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        _fails_at_once, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
    ).fit_async()
    [result] = list(grid)
    assert isinstance(result.error, ValueError)
    assert result.metrics_dataframe is None  # as in Ray: no results, no frame


def _two_reports(config: dict[str, Any]) -> None:
    for i in range(2):
        tune.report({"x": config["x"], "i": i})


@pytest.mark.actorrt(num_cpus=2)
async def test_trial_dirname_creator_may_nest_and_repeat_folders(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        _two_reports,
        param_space={"x": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(
            trial_dirname_creator=lambda trial: f"group/parity_{trial.config['x'] % 2}"
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit_async()
    assert not grid.errors and len(grid) == 4
    for result in grid:
        assert result.path == str(tmp_path / "exp" / "group" / f"parity_{result.config['x'] % 2}")
    for parity in (0, 1):
        with open(tmp_path / "exp" / "group" / f"parity_{parity}" / "result.json") as f:  # noqa: ASYNC230
            lines = [json.loads(line) for line in f]
        # Two trials share the folder: both wrote their results into its logs.
        assert sorted((r["x"], r["i"]) for r in lines) == sorted(
            (x, i) for x in (parity, parity + 2) for i in range(2)
        )


class SlowSetup(tune.Callback):
    """A callback whose setup takes a while on the controller's loop, as the TensorBoard
    writer's import of tensorboardX and torch does on a loaded machine."""

    def setup(self, **info: Any) -> None:
        time.sleep(3.0)


@pytest.mark.actorrt(num_cpus=2)
async def test_the_time_budget_counts_the_callbacks_setup(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    started = time.monotonic()
    grid = await tune.Tuner(
        endless,
        param_space={"rate": 1},
        tune_config=tune.TuneConfig(time_budget_s=3.0),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0,
                                  callbacks=[SlowSetup()]),
    ).fit_async()
    took = time.monotonic() - started
    # The setup spent the budget: the experiment stops as soon as the loop is free again (a
    # budget counted from after the setup would give the trial 3 s more).
    assert took < 3.0 + 2.5, f"fit() took {took:.1f} s with a 3 s budget"
    assert not grid.errors
    assert all(r.status == "TERMINATED" for r in grid if r.metrics)
