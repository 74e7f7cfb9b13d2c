"""Smaller pieces of Ray Tune's public API: ``CallbackList``, ``ExperimentAnalysis.
fetch_trial_dataframes`` and ``PlacementGroupFactory.head_cpus``, as Ray documents them."""

from __future__ import annotations

from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.analysis.experiment_analysis import ExperimentAnalysis
from actorrt.tune.callback import Callback, CallbackList
from actorrt.tune.execution.placement_groups import PlacementGroupFactory


class Recorder(Callback):
    def __init__(self, name: str, seen: list[tuple[str, str, Any]]) -> None:
        self.name, self.seen = name, seen
        self.state: dict[str, Any] | None = None

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        self.seen.append((self.name, "result", result["score"]))

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.seen.append((self.name, "end", len(trials)))

    def get_state(self) -> dict[str, Any] | None:
        return {"name": self.name}

    def set_state(self, state: dict[str, Any]) -> None:
        self.state = state


def scored(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"score": config["x"] * 10 + step})


def test_a_callback_list_calls_every_callback_in_order_in_a_sweep(tmp_path: Any) -> None:
    seen: list[tuple[str, str, Any]] = []
    first, second = Recorder("a", seen), Recorder("b", seen)
    callbacks = CallbackList([first, second])
    assert isinstance(callbacks, Callback) and len(callbacks) == 2 and callbacks[1] is second
    tune.Tuner(
        scored, param_space={"x": 1},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="cbl", verbose=0, callbacks=[callbacks]
        ),
    ).fit()
    assert seen == [
        ("a", "result", 10), ("b", "result", 10), ("a", "result", 11), ("b", "result", 11),
        ("a", "result", 12), ("b", "result", 12), ("a", "end", 1), ("b", "end", 1),
    ]
    state = callbacks.get_state()
    assert state == {"callback_states": [{"name": "a"}, {"name": "b"}]}
    callbacks.set_state(state)
    assert first.state == {"name": "a"} and second.state == {"name": "b"}
    with pytest.raises(ValueError, match="2 callbacks"):
        callbacks.set_state({"callback_states": [None]})
    with pytest.raises(ValueError, match="tune.Callback instances"):
        CallbackList([object()])  # type: ignore[list-item]


class Counting(Callback):
    def __init__(self) -> None:
        self.count = 0

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: Any,
                        **info: Any) -> None:
        self.count += 1

    def get_state(self) -> dict[str, Any] | None:
        return {"count": self.count}

    def set_state(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


def test_a_callback_list_saves_its_callbacks_state_to_a_folder_and_restores_it(
    tmp_path: Any,
) -> None:
    # Ray's CallbackList.save_to_dir / can_restore / restore_from_dir: one file named
    # after CKPT_FILE_TMPL, written only when some callback has state.
    callbacks = CallbackList([Callback(), Counting()])
    for i in range(3):
        callbacks.on_trial_result(iteration=i, trials=[], trial=None, result={})
    callbacks.save_to_dir(str(tmp_path), session_str="s1")
    assert [p.name for p in tmp_path.iterdir()] == [CallbackList.CKPT_FILE_TMPL.format("s1")]
    assert callbacks.can_restore(str(tmp_path))
    restored = CallbackList([Callback(), Counting()])
    restored.restore_from_dir(str(tmp_path))
    assert restored[1].count == 3  # type: ignore[attr-defined]

    stateless = CallbackList([Callback(), Callback()])
    assert stateless.get_state() is None
    empty = tmp_path / "empty"
    empty.mkdir()
    stateless.save_to_dir(str(empty))
    assert list(empty.iterdir()) == [] and not stateless.can_restore(str(empty))
    with pytest.raises(RuntimeError, match="Unable to find checkpoint in .*empty"):
        stateless.restore_from_dir(str(empty))


def test_fetch_trial_dataframes_reads_each_trials_results_again(tmp_path: Any) -> None:
    grid = tune.Tuner(
        scored, param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="frames", verbose=0),
    ).fit()
    analysis = ExperimentAnalysis(grid.experiment_path)
    frames = analysis.fetch_trial_dataframes()
    assert set(frames) == {t.trial_id for t in analysis.trials}
    by_x = {analysis.get_all_configs()[tid]["x"]: frame for tid, frame in frames.items()}
    assert list(by_x[2]["score"]) == [20, 21, 22]
    # A result appended on disk shows once fetched again.
    trial = next(t for t in analysis.trials if t.config["x"] == 1)
    with open(f"{trial.path}/result.json", "a") as f:
        f.write('{"score": 99, "training_iteration": 4}\n')
    assert len(analysis.trial_dataframes[trial.trial_id]) == 3  # read once, kept
    assert list(analysis.fetch_trial_dataframes()[trial.trial_id]["score"])[-1] == 99


def test_head_cpus_is_the_trial_drivers_own_cpus() -> None:
    factory = PlacementGroupFactory([{"CPU": 2, "GPU": 1}, {"CPU": 3}])
    assert factory.head_cpus == 2.0 and not factory.head_bundle_is_empty
    assert factory.required_resources == {"CPU": 5.0, "GPU": 1.0}
    empty_head = PlacementGroupFactory([{}, {"CPU": 1}])
    assert empty_head.head_cpus == 0.0 and empty_head.head_bundle_is_empty


def test_an_empty_head_bundle_is_left_out_of_bundles_as_in_ray() -> None:
    # Ray drops an empty head from `bundles`: they are then the workers' bundles; what
    # the trial's group reserves (the driver's empty bundle first) is `group_bundles`.
    empty_head = PlacementGroupFactory([{}, {"CPU": 1}, {"CPU": 1, "GPU": 1}])
    assert empty_head.bundles == [{"CPU": 1.0}, {"CPU": 1.0, "GPU": 1.0}]
    assert empty_head.group_bundles == [{}, {"CPU": 1.0}, {"CPU": 1.0, "GPU": 1.0}]
    assert empty_head.required_resources == {"CPU": 2.0, "GPU": 1.0}
    full = PlacementGroupFactory([{"CPU": 1}, {"CPU": 2}])
    assert full.bundles == full.group_bundles == [{"CPU": 1.0}, {"CPU": 2.0}]


def five_metrics(config: dict[str, Any]) -> None:
    tune.report({"a": 1.0, "label": "text", "b": 2, "c": 3.5, "d": 4, "e": 5, "flag": True})


def test_without_a_metric_the_final_table_shows_four_reported_metrics(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ray's CLI output: with no metric set, the table shows up to four of the numbers the
    # trials report (not strings or booleans), after the iteration and the time.
    tune.Tuner(
        five_metrics, param_space={"x": 1},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="cols", verbose=1),
    ).fit()
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("trial "))
    assert header.split() == ["trial", "status", "iter", "total", "time", "(s)",
                              "a", "b", "c", "d", "x"]


def old_style_report(config: dict[str, Any]) -> None:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tune.report(mean_loss=config["x"], step=1)  # Ray 1.x-2.6's spelling
    assert [w.category.__name__ for w in caught] == ["RayDeprecationWarning"]
    assert issubclass(caught[0].category, DeprecationWarning)
    assert "pass the metrics as one dict" in str(caught[0].message)
    try:
        tune.report({"a": 1}, b=2)
    except TypeError as exc:
        tune.report({"mixed_refused": "metrics dict and keyword" in str(exc)})


def test_keyword_metrics_still_report_with_a_deprecation_warning(tmp_path: Any) -> None:
    grid = tune.Tuner(
        old_style_report, param_space={"x": 3},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="old", verbose=0),
    ).fit()
    assert not grid.errors
    history = grid[0].metrics_dataframe
    assert history["mean_loss"].iloc[0] == 3 and grid[0].metrics["mixed_refused"] is True
