"""Ray's legacy ``tune.run`` and ``ExperimentAnalysis``, ``Tuner.get_results``,
``Result.best_checkpoints`` and ``tune.with_parameters``, run as Ray scripts with only the
imports changed."""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import warnings
from typing import Any

import pytest

import actorrt as ray
from actorrt import tune


def trainable(config: dict[str, Any]) -> None:
    if config.get("fail"):
        raise ValueError("this trial fails")
    for step in range(1, 5):
        loss = (config["x"] - 2) ** 2 + abs(step - 2)  # best at step 2
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.txt"), "w") as f:
                f.write(str(step))
            tune.report({"loss": loss, "step": step},
                        checkpoint=tune.Checkpoint.from_directory(d))


def step_of(checkpoint: Any) -> int:
    with open(os.path.join(checkpoint.path, "step.txt")) as f:
        return int(f.read())


def test_tune_run_returns_an_experiment_analysis(tmp_path: Any) -> None:
    analysis = tune.run(
        trainable,
        config={"x": tune.grid_search([1, 2, 3])},
        metric="loss",
        mode="min",
        resources_per_trial={"cpu": 1},
        stop={"training_iteration": 4},
        num_samples=1,
        storage_path=str(tmp_path),
        name="legacy",
        verbose=0,
    )
    assert isinstance(analysis, tune.ExperimentAnalysis)
    assert analysis.experiment_path == os.path.join(str(tmp_path), "legacy")
    assert len(analysis.trials) == 3
    assert analysis.best_config == {"x": 2}
    assert analysis.best_trial.config == {"x": 2}
    assert analysis.best_result["loss"] == 2  # its last result (step 4)
    assert step_of(analysis.best_checkpoint) == 2  # its best checkpoint by loss
    assert analysis.get_best_config("loss", "max") in ({"x": 1}, {"x": 3})
    assert analysis.get_best_trial("loss", "min", scope="all").config == {"x": 2}
    assert analysis.get_best_trial("loss", "min", scope="last-5-avg").config == {"x": 2}
    best = analysis.best_trial
    assert step_of(analysis.get_best_checkpoint(best, "step", "max")) == 4
    assert step_of(analysis.get_last_checkpoint(best)) == 4
    frame = analysis.results_df
    assert sorted(frame["config/x"]) == [1, 2, 3] and set(frame.index) == set(analysis.results)
    assert list(analysis.dataframe("loss", "min")["loss"]) == [1, 0, 1]
    assert all(len(df) == 4 for df in analysis.trial_dataframes.values())
    assert set(analysis.get_all_configs()) == {t.trial_id for t in analysis.trials}
    assert analysis.best_result["config"] == {"x": 2}  # Ray's results carry the config
    assert list(analysis.best_result_df.index) == [analysis.best_trial.trial_id]
    # The same experiment, read back from its folder.
    again = tune.ExperimentAnalysis(analysis.experiment_path, default_metric="loss",
                                    default_mode="min")
    assert again.best_config == {"x": 2} and step_of(again.best_checkpoint) == 2


def test_tune_run_raises_tune_error_for_failed_trials_as_ray_does(tmp_path: Any) -> None:
    config = {"x": 1, "fail": tune.grid_search([False, True])}
    with pytest.raises(tune.TuneError, match="Trials did not complete"):
        tune.run(trainable, config=config, storage_path=str(tmp_path), verbose=0)
    analysis = tune.run(trainable, config=config, storage_path=str(tmp_path), verbose=0,
                        raise_on_failed_trial=False)
    assert sorted(t.status for t in analysis.trials) == ["ERROR", "TERMINATED"]
    with pytest.raises(ValueError, match="No `metric` has been passed"):
        analysis.best_config  # noqa: B018  # Ray needs a metric and mode for best_*


def test_tune_run_legacy_checkpoint_arguments_and_resume(tmp_path: Any) -> None:
    with pytest.warns(DeprecationWarning, match="checkpoint_config"):
        analysis = tune.run(
            trainable, config={"x": 2}, storage_path=str(tmp_path), name="kept", verbose=0,
            keep_checkpoints_num=2, checkpoint_score_attr="min-loss",
        )
    kept = sorted(n for n in os.listdir(analysis.trials[0].path) if n.startswith("checkpoint_"))
    # As Ray keeps them: the two best (steps 2 and 3, the newer of equal losses) and the
    # latest (step 4).
    assert kept == ["checkpoint_000001", "checkpoint_000002", "checkpoint_000003"]
    # resume="AUTO" continues the finished experiment: nothing runs again.
    again = tune.run(trainable, config={"x": 2}, storage_path=str(tmp_path), name="kept",
                     verbose=0, resume="AUTO")
    assert [t.last_result["training_iteration"] for t in again.trials] == [4]


class StopAfterThreeTrials(tune.Stopper):
    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen.add(trial_id)
        return False

    def stop_all(self) -> bool:
        return len(self.seen) >= 3


def test_tune_run_samples_until_stopped_with_num_samples_minus_one(tmp_path: Any) -> None:
    analysis = tune.run(trainable, config={"x": tune.randint(0, 5)}, num_samples=-1,
                        stop=StopAfterThreeTrials(), storage_path=str(tmp_path), verbose=0,
                        max_concurrent_trials=1)
    assert len(analysis.trials) >= 3
    assert all(t.status == "TERMINATED" for t in analysis.trials)


def test_tune_run_refuses_what_it_cannot_honour(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="no_such_argument"):
        tune.run(trainable, no_such_argument=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="no trainable is registered as"):
        tune.run("PPO")
    with pytest.raises(ValueError, match="restore"):
        tune.run(trainable, restore="/some/checkpoint")
    with pytest.raises(ValueError, match="needs name="):
        tune.run(trainable, resume="AUTO")
    with pytest.raises(ValueError, match="storage_filesystem"):
        tune.run(trainable, storage_filesystem=object())
    with pytest.raises(ValueError, match="max_failures must be 0"):
        tune.run(trainable, fail_fast=True, max_failures=2)
    with pytest.raises(TypeError):
        tune.run(trainable, "name")  # type: ignore[misc]  # keyword-only, as in Ray
    with pytest.warns(UserWarning, match="export_formats"):
        tune.run(trainable, config={"x": 2}, storage_path=str(tmp_path), verbose=0,
                 export_formats=["model"], stop={"training_iteration": 1})


def test_get_results_and_best_checkpoints(tmp_path: Any) -> None:
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([2, 3])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0,
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min"
            ),
        ),
    )
    with pytest.raises(RuntimeError, match="fit"):
        tuner.get_results()
    grid = tuner.fit()
    assert tuner.get_results() is grid
    best = grid.get_best_result()
    # Ray keeps the num_to_keep=2 best (steps 2, then 3: of equal losses the newer) and
    # the latest (step 4).
    assert [step_of(c) for c, _ in best.best_checkpoints] == [2, 3, 4]
    assert [m["step"] for _, m in best.best_checkpoints] == [2, 3, 4]
    assert step_of(best.get_best_checkpoint("loss", "min")) == 2
    assert step_of(best.get_best_checkpoint("step", "max")) == 4
    with pytest.raises(RuntimeError, match="choose from"):
        best.get_best_checkpoint("accuracy", "max")
    # A restored tuner's results, read from its folder without running anything (Ray's
    # way to analyse a finished experiment).
    restored = tune.Tuner.restore(grid.experiment_path, trainable)
    saved = restored.get_results()
    assert [(r.trial_id, r.status, r.metrics["loss"]) for r in saved] == [
        (r.trial_id, r.status, r.metrics["loss"]) for r in grid
    ]
    assert saved.get_best_result().config == {"x": 2}
    assert [step_of(c) for c, _ in saved.get_best_result().best_checkpoints] == [2, 3, 4]


# ------------------------------------------------------------------ with_parameters

# A large object whose unpickling leaves a mark: one line per deserialisation, a file per
# process. Written as a module so worker processes import it by name.
MODULE = """
import os

MARKS = {marks!r}


def rebuild(payload):
    with open(os.path.join(MARKS, f"loaded_in.{{os.getpid()}}"), "a") as f:
        f.write("loaded\\n")
    return Big(payload)


class Big:
    def __init__(self, payload):
        self.payload = payload

    def __reduce__(self):
        return rebuild, (self.payload,)
"""


def uses_data(config: dict[str, Any], data: Any, offset: int) -> None:
    tune.report({"size": len(data.payload) + offset, "pid": os.getpid()})


class UsesData(tune.Trainable):
    def setup(self, config: dict[str, Any], data: Any = None) -> None:
        self.size = len(data.payload)

    def step(self) -> dict[str, Any]:
        return {"size": self.size, "pid": os.getpid(), "done": True}


@pytest.fixture
def big_module(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    code, marks = tmp_path / "code", tmp_path / "marks"
    code.mkdir()
    marks.mkdir()
    (code / "big_object.py").write_text(MODULE.format(marks=str(marks)))
    monkeypatch.syspath_prepend(str(code))  # workers start with the driver's sys.path
    try:
        yield importlib.import_module("big_object"), marks
    finally:
        sys.modules.pop("big_object", None)


def loads_per_process(marks: Any) -> dict[int, int]:
    return {
        int(name.rsplit(".", 1)[1]): len((marks / name).read_text().splitlines())
        for name in os.listdir(marks)
    }


@pytest.mark.parametrize("kind", ["function", "class"])
def test_with_parameters_sends_a_large_object_to_each_process_once(
    big_module: Any, tmp_path: Any, kind: str
) -> None:
    module, marks = big_module
    data = module.Big(b"x" * 5_000_000)
    if kind == "function":
        wrapped = tune.with_parameters(uses_data, data=data, offset=1)
        expected = 5_000_001
    else:
        wrapped = tune.with_parameters(UsesData, data=data)
        expected = 5_000_000
    ray.init(num_cpus=2)
    try:
        grid = tune.Tuner(
            wrapped,
            param_space={"i": tune.grid_search(list(range(8)))},
            run_config=tune.RunConfig(storage_path=str(tmp_path / "results"), verbose=0),
        ).fit()
    finally:
        ray.shutdown()
    assert len(grid) == 8 and not grid.errors, grid.errors
    assert {r.metrics["size"] for r in grid} == {expected}
    pids = {r.metrics["pid"] for r in grid}
    loads = loads_per_process(marks)
    assert len(pids) < 8  # workers were reused across trials
    assert set(loads) == pids and set(loads.values()) == {1}, loads  # once per process


def reads_array(config: dict[str, Any], data: Any) -> None:
    with open("/proc/self/maps") as f:  # the shared segment, mapped into this worker
        mapped = any("/dev/shm/actorrt-obj-" in line for line in f)
    tune.report({"sum": int(data.sum()), "writeable": bool(data.flags.writeable),
                 "owns": bool(data.flags.owndata), "mapped": mapped, "pid": os.getpid()})


def test_with_parameters_arrays_are_read_from_shared_memory(tmp_path: Any) -> None:
    import numpy as np

    data = np.arange(2_000_000, dtype=np.int64)
    ray.init(num_cpus=2)
    try:
        grid = tune.Tuner(
            tune.with_parameters(reads_array, data=data),
            param_space={"i": tune.grid_search([0, 1, 2])},
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit()
    finally:
        ray.shutdown()
    assert not grid.errors, grid.errors
    for result in grid:
        assert result.metrics["pid"] != os.getpid()
        assert result.metrics["sum"] == int(data.sum())
        # No copy of its own: a read-only view on the shared memory, as Ray's store gives.
        assert result.metrics["mapped"] and not result.metrics["writeable"]
        assert not result.metrics["owns"]


def test_with_parameters_checks_the_names_it_is_given() -> None:
    with pytest.raises(ValueError, match="no parameter named"):
        tune.with_parameters(uses_data, dataset=1)
    with pytest.raises(ValueError, match="function trainable"):
        tune.with_parameters(42, data=1)


def test_with_parameters_and_with_resources_compose(tmp_path: Any) -> None:
    def needs(config: dict[str, Any], extra: int) -> None:
        tune.report({"cpus": tune.get_context().get_trial_resources().required_resources["CPU"],
                     "extra": extra})

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wrapped = tune.with_resources(tune.with_parameters(needs, extra=7), {"cpu": 2})
    ray.init(num_cpus=2)
    try:
        grid = tune.Tuner(
            wrapped, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
        ).fit()
    finally:
        ray.shutdown()
    assert grid[0].metrics["cpus"] == 2 and grid[0].metrics["extra"] == 7
