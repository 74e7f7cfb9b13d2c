"""When a trial's report waits for the controller's answer, and when it goes ahead.

With a scheduler or a stop criterion, or for a class ``Trainable``, each report returns only
after the controller took that result (as in Ray): the trial never runs past a result its
stop was decided on. Otherwise a function trainable's reports go ahead of their answers
(docs/tune.md, "How a sweep runs"), and still every result is recorded, in order, before
the trial counts as ended; a stop decided meanwhile (the time budget) drops whatever the
trial had sent after it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.tune._controller._bus import REPORTS_AHEAD_ENV


class SeenResults(tune.Callback):
    """Leaves one file per result the controller has taken, for the trial to look for."""

    def __init__(self, marks: str) -> None:
        self.marks = marks

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: Any) -> None:
        name = f"{trial.trial_id}-{result['training_iteration']}"
        open(os.path.join(self.marks, name), "w").close()


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def read_lines(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def checks_each_report_was_taken(config: dict[str, Any]) -> None:
    trial_id = tune.get_context().get_trial_id()
    taken = []
    for step in range(1, 7):
        tune.report({"step": step, "taken_before": taken[-1] if taken else True})
        taken.append(os.path.exists(os.path.join(config["marks"], f"{trial_id}-{step}")))
        # After the stop at step 3 this line must never run for step 3's result.
        with open(os.path.join(config["marks"], f"{trial_id}-ran-past-{step}"), "w"):
            pass


@pytest.mark.actorrt(num_cpus=2)
async def test_with_a_stop_criterion_each_report_waits_for_its_answer(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await asyncio_fit(tmp_path, "stopped", stop={"training_iteration": 3})
    assert len(grid) == 2 and not grid.errors
    marks = tmp_path / "marks-stopped"
    for result in grid:
        assert result.metrics["training_iteration"] == 3
        assert len(result.metrics_dataframe) == 3
        assert result.metrics["taken_before"] is True
        trial_id = result.metrics["trial_id"]
        # It ran past reports 1 and 2 (answered "go on"), never past report 3.
        assert (marks / f"{trial_id}-ran-past-2").exists()
        assert not (marks / f"{trial_id}-ran-past-3").exists()


@pytest.mark.actorrt(num_cpus=2)
async def test_lockstep_when_asked_for_by_the_environment(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REPORTS_AHEAD_ENV, "0")
    grid = await asyncio_fit(tmp_path, "lockstep")
    assert len(grid) == 2 and not grid.errors
    for result in grid:
        frame = result.metrics_dataframe
        assert list(frame["step"]) == [1, 2, 3, 4, 5, 6]
        assert all(frame["taken_before"])  # each report returned after the controller took it


@pytest.mark.actorrt(num_cpus=2)
async def test_reports_ahead_are_all_recorded_in_order(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await asyncio_fit(tmp_path, "ahead")
    assert len(grid) == 2 and not grid.errors
    for result in grid:
        assert result.metrics["training_iteration"] == 6 and result.metrics["done"] is True
        assert list(result.metrics_dataframe["step"]) == [1, 2, 3, 4, 5, 6]
        lines = read_lines(os.path.join(result.path, "result.json"))
        assert [line["training_iteration"] for line in lines] == [1, 2, 3, 4, 5, 6]
        # The callback heard of every result before the trial was counted as ended.
        marks = tmp_path / "marks-ahead"
        trial_id = result.metrics["trial_id"]
        assert all((marks / f"{trial_id}-{step}").exists() for step in range(1, 7))


def reports_until_stopped(config: dict[str, Any]) -> None:
    step = 0
    while True:
        step += 1
        tune.report({"step": step})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_stop_while_reports_go_ahead_drops_what_came_after_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        reports_until_stopped,
        param_space={"x": 1},
        # Long enough for the trial's worker to start on a loaded machine.
        tune_config=tune.TuneConfig(time_budget_s=3.0),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="budget", verbose=0),
    ).fit_async()
    assert len(grid) == 1 and not grid.errors
    for result in grid:
        last = result.metrics["training_iteration"]
        assert last > 1 and result.metrics["done"] is True  # ended with its stopped result
        lines = read_lines(os.path.join(result.path, "result.json"))
        iterations = [line["training_iteration"] for line in lines]
        # Nothing after the result the stop was answered to, and nothing missing before it.
        assert iterations == list(range(1, last + 1))


@pytest.mark.actorrt(num_cpus=2)
async def test_a_bad_setting_is_refused_naming_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REPORTS_AHEAD_ENV, "-3")
    with pytest.raises(ValueError, match=r"ACTORRT_TUNE_REPORTS_AHEAD='-3'.*whole number"):
        await asyncio_fit(tmp_path, "bad")


async def asyncio_fit(tmp_path: Any, name: str, **run: Any) -> tune.ResultGrid:
    marks = tmp_path / f"marks-{name}"
    marks.mkdir()
    return await tune.Tuner(
        checks_each_report_was_taken,
        param_space={"marks": str(marks), "x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name=name, verbose=0,
            callbacks=[SeenResults(str(marks))], **run,
        ),
    ).fit_async()


class Counter(tune.Trainable):
    """Counts; or, as ``role="fail"``, fails once the counting trial is well under way."""

    def setup(self, config: dict[str, Any]) -> None:
        self.count = 0
        self.role, self.marks = config["role"], config["marks"]

    def step(self) -> dict[str, Any]:
        self.count += 1
        going = os.path.join(self.marks, "counting")
        if self.role == "count" and self.count == 100:
            open(going, "w").close()
        if self.role == "fail":
            deadline = time.monotonic() + 60
            while not os.path.exists(going) and time.monotonic() < deadline:
                time.sleep(0.01)
            raise RuntimeError("the other trial is counting: fail the experiment")
        return {"count": self.count}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "count"), "w") as f:
            f.write(str(self.count))


@pytest.mark.actorrt(num_cpus=2)
async def test_a_class_trainable_stops_in_lockstep_so_its_last_checkpoint_matches(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    # Told to stop by fail_fast, it saves the state of the result it was stopped at.
    marks = tmp_path / "marks"
    marks.mkdir()
    grid = await tune.Tuner(
        Counter,
        param_space={"role": tune.grid_search(["count", "fail"]), "marks": str(marks)},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="counter", verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
            failure_config=tune.FailureConfig(fail_fast=True),
        ),
    ).fit_async()
    counted = next(r for r in grid if r.config["role"] == "count")
    assert counted.error is None and counted.checkpoint is not None, counted
    assert counted.metrics["count"] >= 100
    saved = int(read_text(os.path.join(counted.checkpoint.path, "count")))
    assert saved == counted.metrics["count"] == counted.metrics["training_iteration"]


def reports_a_value_that_cannot_travel(config: dict[str, Any]) -> None:
    tune.report({"step": 1})
    tune.report({"step": 2, "lock": threading.Lock()})
    open(os.path.join(config["marks"], "ran-past-the-bad-report"), "w").close()
    tune.report({"step": 3})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_result_that_cannot_be_sent_fails_its_own_report(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        reports_a_value_that_cannot_travel,
        param_space={"marks": str(tmp_path)},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="bad-value", verbose=0),
    ).fit_async()
    (result,) = list(grid)
    assert "cannot be serialized" in str(result.error)
    assert result.metrics["training_iteration"] == 1
    assert not (tmp_path / "ran-past-the-bad-report").exists()
