"""Ray Tune behaviours that a ported script relies on without saying so.

Each test is written from Ray Tune 2.60's documented behaviour and runs Ray-style code with
only the imports changed (``import actorrt as ray; from actorrt import tune``): the
working directory of trials, what a function trainable's return value becomes, every
callback hook and what an exception in one does, ``sample_from``'s argument, the checks on
reported metrics, what ``Tuner()`` does at construction, and the order of config columns.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import train, tune
from actorrt.tune.schedulers import ASHAScheduler

ROOT = Path(__file__).resolve().parents[2]


def run_script(code: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` as a script in ``tmp_path`` (its working directory); return stdout."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("RAY_CHDIR_TO_TRIAL_DIR", None)
    done = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=50,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# --------------------------------------------------------------- the working directory

CHDIR_SCRIPT = """
import json, os, sys
import actorrt as ray
from actorrt import tune

def train(config):
    # Ray's default: each trial runs in its own trial folder; relative writes stay there.
    with open("model.txt", "w") as f:
        f.write(f"trial {config['x']}")
    tune.report({
        "cwd": os.getcwd(),
        "orig": os.environ["TUNE_ORIG_WORKING_DIR"],
        "trial_dir": tune.get_context().get_trial_dir(),
        "pid": os.getpid(),
    })

ray.init(num_cpus=2)  # two trials at a time; the third reuses a worker process
rows = []
for chdir in ("default", "0"):
    if chdir == "0":
        os.environ["RAY_CHDIR_TO_TRIAL_DIR"] = "0"
    grid = tune.Tuner(
        train,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=tune.RunConfig(storage_path=sys.argv[1], name=f"exp_{chdir}", verbose=0),
    ).fit()
    for result in grid:
        rows.append({"chdir": chdir, **{k: result.metrics[k] for k in
                     ("cwd", "orig", "trial_dir", "pid")}})
print(json.dumps({"rows": rows, "driver_cwd": os.getcwd()}))
"""


def test_each_trial_runs_in_its_own_folder_unless_turned_off(tmp_path: Path) -> None:
    out = json.loads(run_script(CHDIR_SCRIPT, tmp_path, str(tmp_path / "results")))
    rows, script_dir = out["rows"], str(tmp_path)
    assert out["driver_cwd"] == script_dir  # the driver's own directory never changes
    default = [r for r in rows if r["chdir"] == "default"]
    assert len(default) == 3
    for row in default:
        assert row["cwd"] == row["trial_dir"] and row["orig"] == script_dir
        # Two trials wrote the same relative name: each file is in its own folder.
        assert (Path(row["trial_dir"]) / "model.txt").is_file()
    texts = {(Path(r["trial_dir"]) / "model.txt").read_text() for r in default}
    assert texts == {"trial 1", "trial 2", "trial 3"}
    # A worker process is reused by the next trial, which still gets its own folder.
    assert len({r["pid"] for r in default}) < 3
    assert len({r["cwd"] for r in default}) == 3
    off = [r for r in rows if r["chdir"] == "0"]
    assert len(off) == 3 and all(r["cwd"] == script_dir == r["orig"] for r in off)
    assert (tmp_path / "model.txt").read_text().startswith("trial ")


def cwd_loop(config: dict[str, Any]) -> None:
    train.report({"worker_cwd": os.getcwd(), "rank": train.get_context().get_world_rank()})


def train_driver(config: dict[str, Any]) -> None:
    result = train.DataParallelTrainer(
        cwd_loop, scaling_config=train.ScalingConfig(num_workers=2)
    ).fit()
    tune.report({"worker_cwd": result.metrics["worker_cwd"], "driver_cwd": os.getcwd()})


@pytest.mark.actorrt(num_cpus=3)
async def test_train_workers_in_a_trial_share_its_folder(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        tune.with_resources(train_driver, train.ScalingConfig(num_workers=2)),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    [result] = grid
    assert result.error is None, result.error
    assert result.metrics["worker_cwd"] == result.metrics["driver_cwd"] == result.path
    assert os.getcwd() != result.path


def test_chdir_to_trial_dir_is_deprecated_as_in_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_CHDIR_TO_TRIAL_DIR", "1")  # put back after the test
    with pytest.warns(DeprecationWarning, match="RAY_CHDIR_TO_TRIAL_DIR"):
        tune.TuneConfig(chdir_to_trial_dir=False)
    assert os.environ["RAY_CHDIR_TO_TRIAL_DIR"] == "0"
    with pytest.raises(ValueError, match="chdir_to_trial_dir must be a bool"):
        tune.TuneConfig(chdir_to_trial_dir="no")


@pytest.mark.actorrt(num_cpus=2)
async def test_a_bad_chdir_variable_fails_fit(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_CHDIR_TO_TRIAL_DIR", "false")
    tuner = tune.Tuner(report_x, run_config=tune.RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(ValueError, match="RAY_CHDIR_TO_TRIAL_DIR='false' is not an integer"):
        await tuner.fit_async()


# ---------------------------------------------------------- what a trainable returns


def report_x(config: dict[str, Any]) -> None:
    tune.report({"x": config.get("x", 0)})


def returns(config: dict[str, Any]) -> Any:
    tune.report({"step": 1})
    return config["value"]


def yields(config: dict[str, Any]) -> Any:
    for i in range(3):
        yield {"loss": 3 - i}
    yield 0.5  # a number: recorded as _metric
    return {"ignored": True}  # as in Ray, a generator's return value is not recorded


async def async_trainable(config: dict[str, Any]) -> None:
    tune.report({"never": 1})


@pytest.mark.actorrt(num_cpus=2)
async def test_return_values_are_recorded_as_ray_records_them(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    values = [{"acc": 0.9}, 7.5, 0, None, "done", [1, 2]]
    grid = await tune.Tuner(
        returns,
        param_space={"value": tune.grid_search(values)},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    by_value = {json.dumps(r.config["value"]): r for r in grid}
    dict_result = by_value[json.dumps({"acc": 0.9})]
    assert dict_result.metrics["acc"] == 0.9 and dict_result.metrics["training_iteration"] == 2
    number = by_value["7.5"]
    assert number.metrics["_metric"] == 7.5 and number.metrics["training_iteration"] == 2
    for falsy in ("0", "null"):  # nothing recorded for a falsy value (Ray: `if not output`)
        assert by_value[falsy].metrics["training_iteration"] == 1 and not by_value[falsy].error
    for rejected in ('"done"', "[1, 2]"):
        error = by_value[rejected].error
        assert isinstance(error, ValueError), error
        assert "must return (or yield) a dict of metrics, a single number" in str(error)


@pytest.mark.actorrt(num_cpus=2)
async def test_generator_trainables_report_each_yield(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        yields, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
    ).fit_async()
    [result] = grid
    assert result.error is None
    history = result.metrics_dataframe
    assert list(history["training_iteration"]) == [1, 2, 3, 4]
    assert list(history["loss"])[:3] == [3, 2, 1]
    assert result.metrics["_metric"] == 0.5 and "ignored" not in result.metrics


@pytest.mark.actorrt(num_cpus=2)
async def test_an_async_trainable_is_a_clear_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        async_trainable, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
    ).fit_async()
    [result] = grid
    assert isinstance(result.error, ValueError)
    assert "async trainables are not supported" in str(result.error)


# ------------------------------------------------------------------------- callbacks


class Hooks(tune.Callback):
    """Writes down every hook Ray calls, with the arguments Ray passes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _note(self, hook: str, **kwargs: Any) -> None:
        self.calls.append((hook, kwargs))

    def setup(self, stop: Any = None, num_samples: Any = None, total_num_samples: Any = None,
              **info: Any) -> None:
        self._note("setup", stop=stop, num_samples=num_samples)

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._note("on_step_begin", iteration=iteration, n=len(trials))

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._note("on_step_end", iteration=iteration, n=len(trials))

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._note("on_trial_start", iteration=iteration, trial=trial.trial_id)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self._note("on_trial_result", iteration=iteration, trial=trial.trial_id,
                   step=result["training_iteration"])

    def on_checkpoint(
        self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        self._note("on_checkpoint", iteration=iteration, trial=trial.trial_id,
                   files=sorted(os.listdir(checkpoint.path)))

    def on_trial_save(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._note("on_trial_save", iteration=iteration, trial=trial.trial_id)

    def on_trial_complete(
        self, iteration: int, trials: list[Any], trial: Any, **info: Any
    ) -> None:
        self._note("on_trial_complete", iteration=iteration, trial=trial.trial_id)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self._note("on_experiment_end", n=len(trials))

    def hooks(self) -> list[str]:
        return [hook for hook, _ in self.calls]


def checkpoints_twice(config: dict[str, Any]) -> None:
    os.makedirs("ckpt", exist_ok=True)  # in the trial folder: the working directory
    for step in range(2):
        with open(os.path.join("ckpt", "weights.txt"), "w") as f:
            f.write(str(step))
        tune.report(
            {"loss": 1.0 / (step + 1)}, checkpoint=tune.Checkpoint.from_directory("ckpt")
        )


@pytest.mark.actorrt(num_cpus=2)
async def test_every_hook_ray_calls_is_called_with_rays_arguments(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    hooks = Hooks()
    grid = await tune.Tuner(
        checkpoints_twice,
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0, callbacks=[hooks]),
    ).fit_async()
    assert not grid.errors
    names = hooks.hooks()
    assert names[0] == "setup" and names[-1] == "on_experiment_end"
    trial_hooks = [h for h in names if not h.startswith("on_step") and h != "setup"]
    assert trial_hooks == [
        "on_trial_start",
        "on_trial_result", "on_checkpoint", "on_trial_save",
        "on_trial_result", "on_checkpoint", "on_trial_save",
        "on_trial_complete",
        "on_experiment_end",
    ]
    checkpoint_calls = [kw for hook, kw in hooks.calls if hook == "on_checkpoint"]
    assert all("weights.txt" in kw["files"] for kw in checkpoint_calls)
    # Steps: numbered from 0, each begun and ended; trial events happen inside steps.
    steps = [(h, kw["iteration"]) for h, kw in hooks.calls if h.startswith("on_step")]
    begins = [i for h, i in steps if h == "on_step_begin"]
    assert begins == list(range(len(begins))) and len(begins) >= 2
    assert [i for h, i in steps if h == "on_step_end"] == begins
    begin_at = {kw["iteration"]: n for n, (h, kw) in enumerate(hooks.calls)
                if h == "on_step_begin"}
    end_at = {kw["iteration"]: n for n, (h, kw) in enumerate(hooks.calls)
              if h == "on_step_end"}
    for n, (hook, kw) in enumerate(hooks.calls):
        if "trial" in kw:  # inside the step it names: after its begin, before its end
            assert begin_at[kw["iteration"]] < n < end_at[kw["iteration"]], (hook, kw)


class FailsOnResult(tune.Callback):
    def __init__(self) -> None:
        self.ended = threading.Event()

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        raise ConnectionError("the dashboard is down")

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.ended.set()


class FailsOnCheckpoint(tune.Callback):
    def on_checkpoint(self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any,
                      **info: Any) -> None:
        raise OSError("disk full")


def many_reports(config: dict[str, Any]) -> None:
    for step in range(1000):
        tune.report({"loss": step})


@pytest.mark.actorrt(num_cpus=2)
async def test_an_exception_in_a_callback_ends_fit_with_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    callback = FailsOnResult()
    tuner = tune.Tuner(
        many_reports,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="exp", verbose=0, callbacks=[callback]
        ),
    )
    with pytest.raises(ConnectionError, match="the dashboard is down") as caught:
        await tuner.fit_async()
    assert any("FailsOnResult.on_trial_result" in note for note in caught.value.__notes__)
    assert callback.ended.is_set()  # on_experiment_end still ran, as in Ray's cleanup
    # The trials were stopped, not run to the end, and the experiment can be resumed.
    lines = (tmp_path / "exp" / "experiment_state.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["event"] == "interrupted"
    assert tune.Tuner.can_restore(tmp_path / "exp")


@pytest.mark.actorrt(num_cpus=2)
async def test_an_exception_in_on_checkpoint_is_logged_as_in_ray(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="actorrt.tune"):
        grid = await tune.Tuner(
            checkpoints_twice,
            run_config=tune.RunConfig(
                storage_path=str(tmp_path), verbose=0, callbacks=[FailsOnCheckpoint()]
            ),
        ).fit_async()
    [result] = grid
    assert result.error is None and result.checkpoint is not None
    assert sum("FailsOnCheckpoint.on_checkpoint raised" in r.getMessage()
               for r in caplog.records) == 2


# ---------------------------------------------------------------------- sample_from


def echo_config(config: dict[str, Any]) -> None:
    tune.report({"seen": json.dumps(config, sort_keys=True)})


@pytest.mark.actorrt(num_cpus=2)
async def test_sample_from_receives_the_config(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    space = {
        "a": tune.grid_search([1, 2]),
        "model": {"width": tune.choice([8])},
        "by_key": tune.sample_from(lambda config: config["a"] * 10),
        "by_attribute": tune.sample_from(lambda config: config.model.width + config.a),
        "old_spec_form": tune.sample_from(lambda spec: spec.config.a * 100),
        "no_argument": tune.sample_from(lambda: "constant"),
    }
    grid = await tune.Tuner(
        echo_config, param_space=space,
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    seen = sorted((json.loads(r.metrics["seen"]) for r in grid), key=lambda c: c["a"])
    assert [(c["by_key"], c["by_attribute"], c["old_spec_form"], c["no_argument"])
            for c in seen] == [(10, 9, 100, "constant"), (20, 10, 200, "constant")]


def test_sample_from_with_two_arguments_is_a_clear_error(tmp_path: Path) -> None:
    # As Ray's Function domain: refused where it is written, not when it is resolved.
    with pytest.raises(ValueError, match="callable with either 0 or 1 parameters"):
        tune.sample_from(lambda a, b: 1)


# ------------------------------------------------------------ checks on reported metrics


def reports_loss(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"loss": config.get("value", 1.0) * (step + 1)})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_metric_that_no_trial_reports_fails_fit(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tuner = tune.Tuner(
        reports_loss,
        tune_config=tune.TuneConfig(metric="accuracy", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    with pytest.raises(ValueError, match="without the metric 'accuracy'") as caught:
        await tuner.fit_async()
    assert "TUNE_DISABLE_STRICT_METRIC_CHECKING=1" in str(caught.value)
    scheduler = ASHAScheduler(metric="accuracy", mode="max", max_t=3, grace_period=1)
    with pytest.raises(ValueError, match="that AsyncHyperBandScheduler expects"):
        await tune.Tuner(
            reports_loss,
            tune_config=tune.TuneConfig(scheduler=scheduler),
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit_async()
    monkeypatch.setenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    grid = await tune.Tuner(
        reports_loss,
        tune_config=tune.TuneConfig(metric="accuracy", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors


@pytest.mark.actorrt(num_cpus=2)
async def test_non_numeric_and_nan_metrics_are_not_silent(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asha = ASHAScheduler(max_t=3, grace_period=1)
    with pytest.raises(TypeError, match="reported loss='high' \\(str\\); AsyncHyperBandScheduler"):
        await tune.Tuner(
            reports_loss,
            param_space={"value": "high"},
            tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=asha),
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit_async()
    with caplog.at_level(logging.WARNING, logger="actorrt.tune"):
        grid = await tune.Tuner(
            reports_loss,
            param_space={"value": math.nan},
            tune_config=tune.TuneConfig(
                metric="loss", mode="min", scheduler=ASHAScheduler(max_t=3, grace_period=1)
            ),
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit_async()
    assert not grid.errors
    nan_warnings = [r for r in caplog.records if "loss=nan" in r.getMessage()]
    assert len(nan_warnings) == 1  # once per metric


# ------------------------------------------------------------------ Tuner construction


def test_can_restore_is_true_once_a_tuner_is_constructed(tmp_path: Path) -> None:
    path = tmp_path / "exp"
    assert not tune.Tuner.can_restore(path)
    tune.Tuner(report_x, run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp"))
    assert tune.Tuner.can_restore(path)


@pytest.mark.actorrt(num_cpus=2)
async def test_a_constructed_experiment_restores_and_runs_from_the_start(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    tune.Tuner(
        report_x,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    )
    grid = await tune.Tuner.restore(str(tmp_path / "exp"), report_x).fit_async()
    assert sorted(r.metrics["x"] for r in grid) == [1, 2]


@pytest.mark.actorrt(num_cpus=2)
async def test_fit_twice_runs_a_second_experiment_without_mixing_results(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    tuner = tune.Tuner(
        reports_loss, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
    )
    first = await tuner.fit_async()
    second = await tuner.fit_async()
    assert first[0].path != second[0].path
    for grid in (first, second):
        assert list(grid[0].metrics_dataframe["training_iteration"]) == [1, 2, 3]


def test_a_trainable_that_cannot_be_sent_fails_at_construction(tmp_path: Path) -> None:
    lock = threading.Lock()

    def holds_a_lock(config: dict[str, Any]) -> None:
        with lock:
            tune.report({"x": 1})

    with pytest.raises(TypeError, match="'holds_a_lock' cannot be pickled"):
        tune.Tuner(holds_a_lock, run_config=tune.RunConfig(storage_path=str(tmp_path)))


def test_a_function_that_cannot_take_the_config_fails_at_construction(tmp_path: Path) -> None:
    def no_config() -> None:
        tune.report({"x": 1})

    def two_arguments(config: dict[str, Any], data: Any) -> None:
        tune.report({"x": 1})

    for trainable in (no_config, two_arguments):
        with pytest.raises(ValueError, match="must take the config as its one positional"):
            tune.Tuner(trainable, run_config=tune.RunConfig(storage_path=str(tmp_path)))


@pytest.mark.actorrt(num_cpus=2)
async def test_checkpoint_frequency_with_a_function_trainable_is_a_value_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    for config in (
        tune.CheckpointConfig(checkpoint_frequency=2),
        tune.CheckpointConfig(checkpoint_at_end=True),
    ):
        tuner = tune.Tuner(
            report_x,
            run_config=tune.RunConfig(storage_path=str(tmp_path), checkpoint_config=config),
        )
        with pytest.raises(ValueError, match="not supported for a function trainable"):
            await tuner.fit_async()


# ------------------------------------------------------ config columns, in the user's order

COLUMNS_SCRIPT = """
import sys
import actorrt as ray
from actorrt import tune

def train(config):
    tune.report({"score": config["zeta"]})

LONG = "a-long-value-" * 6
ray.init(num_cpus=2)
tune.Tuner(
    train,
    param_space={
        "zeta": tune.grid_search([1, 2]),
        "alpha": LONG,
        "model": {"width": 8, "act": "relu"},
        "beta": 0.5, "gamma": 1, "delta": 2, "epsilon": 3, "eta": 4,
    },
    tune_config=tune.TuneConfig(metric="score", mode="max"),
    run_config=tune.RunConfig(storage_path=sys.argv[1], name="exp", verbose=1),
).fit()
"""

ORDER = ["zeta", "alpha", "model/width", "model/act", "beta", "gamma", "delta", "epsilon", "eta"]


def test_config_columns_keep_the_users_order_and_are_not_cut(tmp_path: Path) -> None:
    out = run_script(COLUMNS_SCRIPT, tmp_path, str(tmp_path / "results"))
    long_value = "a-long-value-" * 6
    [header] = [line for line in out.splitlines() if line.startswith("trial ")]
    names = header.split()
    assert [n for n in names if n in ORDER] == ORDER
    assert sum(long_value in line for line in out.splitlines()) >= 2  # each trial's row

    shown = subprocess.run(
        [sys.executable, "-m", "actorrt", "results", str(tmp_path / "results" / "exp")],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=50,
    )
    assert shown.returncode == 0, shown.stderr
    [header] = [line for line in shown.stdout.splitlines() if line.startswith("trial ")]
    assert header.split()[4:] == ORDER
    rows = [line for line in shown.stdout.splitlines() if line.startswith("train_")]
    assert len(rows) == 2 and all(json.dumps(long_value) in row for row in rows)
