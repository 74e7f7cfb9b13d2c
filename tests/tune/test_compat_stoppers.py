"""Ray's stoppers and every ``stop=`` form Ray accepts, run as Ray scripts with only the
imports changed (``import actorrt as ray; from actorrt import tune``)."""

from __future__ import annotations

import datetime
import itertools
import time
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.stopper import (
    CombinedStopper,
    ExperimentPlateauStopper,
    FunctionStopper,
    MaximumIterationStopper,
    Stopper,
    TimeoutStopper,
    TrialPlateauStopper,
)


def counting(config: dict[str, Any]) -> None:
    for i in itertools.count(1):
        done = i == config.get("done_at")
        tune.report({"score": i, "flat": 1.0, "info": {"steps": i}, "done": done})


_names = itertools.count()


def fit(tmp_path: Any, stop: Any, space: dict[str, Any] | None = None) -> tune.ResultGrid:
    return tune.Tuner(
        counting,
        param_space=space or {"done_at": 0},
        run_config=tune.RunConfig(
            stop=stop, storage_path=str(tmp_path), name=f"run{next(_names)}", verbose=0
        ),
    ).fit()


def iterations(grid: tune.ResultGrid) -> list[int]:
    assert not grid.errors, grid.errors
    return [r.metrics.get("training_iteration", 0) for r in grid]


def test_every_stop_form_ray_accepts(ray_start_2_cpus: None, tmp_path: Any) -> None:
    assert iterations(fit(tmp_path, {"training_iteration": 3})) == [3]
    assert iterations(fit(tmp_path, {"info/steps": 4})) == [4]  # nested: Ray's "/" names
    # A trial that reports done=True has finished, and {"done": True} says the same.
    assert iterations(fit(tmp_path, {"done": True}, {"done_at": 4})) == [4]
    assert iterations(fit(tmp_path, None, {"done_at": 2})) == [2]
    assert iterations(fit(tmp_path, lambda trial_id, result: result["score"] >= 5)) == [5]
    assert iterations(fit(tmp_path, MaximumIterationStopper(max_iter=6))) == [6]


def test_plateau_combined_and_experiment_wide_stoppers(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    plateau = TrialPlateauStopper("flat", std=0.01, num_results=3, grace_period=5)
    assert iterations(fit(tmp_path, plateau)) == [5]
    combined = CombinedStopper(MaximumIterationStopper(9), FunctionStopper(
        lambda trial_id, result: result["score"] >= 7
    ))
    assert iterations(fit(tmp_path, combined)) == [7]
    space = {"done_at": tune.grid_search([0, 0])}
    experiment = ExperimentPlateauStopper("flat", std=0.001, top=4, mode="max", patience=2)
    ended = iterations(fit(tmp_path, experiment, space))
    assert len(ended) == 2 and max(ended) < 50  # the whole experiment stopped
    grid = fit(tmp_path, TimeoutStopper(datetime.timedelta(seconds=1)), space)
    assert len(grid) == 2 and not grid.errors  # both stopped when the time was up


def test_a_custom_stopper_class_as_in_ray(ray_start_2_cpus: None, tmp_path: Any) -> None:
    class StopAfterTwoTrialsReachFour(Stopper):
        def __init__(self) -> None:
            self.reached: set[str] = set()

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            if result["score"] >= 4:
                self.reached.add(trial_id)
            return False

        def stop_all(self) -> bool:
            return len(self.reached) >= 2

    grid = fit(tmp_path, StopAfterTwoTrialsReachFour(), {"done_at": tune.grid_search([0, 0])})
    assert len(grid) == 2 and not grid.errors


def test_stopper_semantics_match_ray() -> None:
    stopper = MaximumIterationStopper(2)
    assert [stopper("a", {}), stopper("b", {}), stopper("a", {})] == [False, False, True]
    plateau = TrialPlateauStopper("m", std=0.1, num_results=2, grace_period=1,
                                  metric_threshold=1.0, mode="min")
    assert not plateau("t", {"m": 5.0}) and not plateau("t", {"m": 5.0})  # above threshold
    assert not plateau("t", {"m": 0.5}) and plateau("t", {"m": 0.5})
    experiment = ExperimentPlateauStopper("m", top=2, mode="min")
    assert not experiment("a", {"m": 1.0})
    assert experiment("b", {"m": 1.0}) and experiment.stop_all()  # patience 0
    assert FunctionStopper.is_valid_function(lambda trial_id, result: True)
    assert not FunctionStopper.is_valid_function(MaximumIterationStopper(1))


def test_timeout_stopper_counts_from_its_first_check(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    timeout = TimeoutStopper(datetime.timedelta(seconds=10))
    clock[0] += 60  # time before the experiment runs does not count, as in Ray
    assert not timeout.stop_all()
    clock[0] += 9
    assert not timeout.stop_all()
    clock[0] += 1
    assert timeout.stop_all()


def test_bad_stoppers_fail_where_they_are_made() -> None:
    with pytest.raises(ValueError, match="max_iter"):
        MaximumIterationStopper(0)
    with pytest.raises(ValueError, match="metric_threshold needs mode"):
        TrialPlateauStopper("m", metric_threshold=1.0)
    with pytest.raises(ValueError, match="mode"):
        ExperimentPlateauStopper("m", mode="best")
    with pytest.raises(ValueError, match="timeout"):
        TimeoutStopper(-1)
    with pytest.raises(ValueError, match="Stopper instances"):
        CombinedStopper(MaximumIterationStopper(1), "nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="FunctionStopper takes"):
        FunctionStopper(lambda: True)

    class LooksLikeAStopper:
        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return False

        def stop_all(self) -> bool:
            return False

    with pytest.raises(ValueError, match="subclass tune.Stopper"):
        FunctionStopper.is_valid_function(LooksLikeAStopper())
    with pytest.raises(ValueError, match="watches 'm'"):
        TrialPlateauStopper("m")("t", {"other": 1})


def test_a_nested_stop_dict_is_refused_as_ray_refuses_it(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    with pytest.raises(ValueError, match="slashes"):
        fit(tmp_path, {"info": {"steps": 1}})


def reports_once(config: dict[str, Any]) -> None:
    tune.report({"score": 1})
    while True:  # never reports again: only the stopper's own clock can end it
        time.sleep(0.05)


def test_timeout_stopper_ends_trials_that_do_not_report(
    ray_start_2_cpus: None, tmp_path: Any
) -> None:
    grid = tune.Tuner(
        reports_once,
        run_config=tune.RunConfig(
            stop=TimeoutStopper(1), storage_path=str(tmp_path), verbose=0
        ),
    ).fit()
    [result] = grid
    assert result.error is None and result.status == "TERMINATED"
    assert result.metrics["training_iteration"] == 1
